// Package schemagen turns a cluster's discovery and OpenAPI v3 documents into the
// typed Cedar schema that kcedar's policies, authorizer and condition evaluator share.
package schemagen
