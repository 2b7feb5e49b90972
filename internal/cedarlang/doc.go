// Package cedarlang is the Cedar policy language as kcedar uses it: strict
// parsing (ids, positions, nesting limits), validation against the typed
// schema, namespace confinement of delegated policies, and the index that
// narrows a policy set to the candidates of one request. It evaluates
// nothing: the decision engine (internal/engine) does.
package cedarlang
