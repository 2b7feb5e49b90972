// Package embed tests kcedar as a Go library, from its own module, the way an
// embedder uses it: only the public packages (schemagen, cedar, residual,
// server) and k8s.io modules. The in-process authorizer sits in
// k8s.io/apiserver's union authorizer, its conditions are evaluated through
// upstream's EvaluateConditions, and package server answers the same requests
// over HTTPS with the same decisions and the same signed conditions.
//
// The root module's `go test ./...` does not enter this nested module;
// .ci/run tests it with `cd test/embed && go test ./...`.
package embed
