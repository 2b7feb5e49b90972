// Package schemagen turns a cluster's discovery and OpenAPI v3 documents into
// kcedar's typed Cedar schema: every resource becomes an entity type with its
// object's fields as attributes, every verb an action, and users, groups,
// service accounts and nodes principals. The documents come from a live
// cluster ([FromCluster]), from a directory that `kcedar schema capture`
// wrote ([FromDir]), or from the copy of stock Kubernetes v1.37 built into
// kcedar ([Default]); a schema that `kcedar schema export` wrote is read back
// with [Parse].
//
// A Schema is immutable and safe for concurrent use. Package cedar decides
// with it; package residual evaluates conditions against it.
package schemagen
