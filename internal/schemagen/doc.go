// Package schemagen turns a cluster's discovery and OpenAPI v3 documents into the
// typed Cedar schema that kcedar's policies, authorizer and condition evaluator share.
//
// The pieces:
//
//   - Documents holds aggregated discovery (/api, /apis) and the /openapi/v3
//     documents: FetchLive reads a cluster, ReadDir / WriteDir a saved copy
//     (kcedar schema capture), Default the snapshot of stock Kubernetes v1.37
//     embedded from ./default.
//   - Generate builds the Schema model (model.go): one Resource per resource and
//     subresource, the object fields of each served version, the OpenAPI
//     definitions they use, map types, verbs, and warnings for everything that
//     cannot be typed exactly.
//   - CedarAST, MarshalCedar and MarshalJSON print the model with cedar-go's
//     x/exp/schema; ParseSchema rebuilds the model from such a printout.
//   - Load and LoadDocuments read one Source: a live cluster (a *rest.Config),
//     a directory, a schema file or the default. Flags and kubeconfig files are
//     the CLI's business (cmd/kcedar).
//
// The model is the single source of truth: the printed schema is derived from it,
// and the entities package (internal/entities) converts Kubernetes objects into Cedar values by walking
// the same model, so values always conform to the schema. The names are kcedar's
// contract with policy authors (names.go, docs/schema.md).
package schemagen
