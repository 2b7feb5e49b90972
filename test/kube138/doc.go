// Package kube138 tests kcedar through the code of Kubernetes 1.38
// (k8s.io/* v0.38.0-beta.0), where KEP-5681 conditional authorization ships
// as alpha (feature gate ConditionalAuthorization): `kcedar serve` is called
// over HTTPS by k8s.io/apiserver's own webhook authorizer, built from the
// AuthorizationConfiguration and kubeconfig `kcedar manifests
// --conditions-review` writes, as kube-apiserver's reload.go builds it; the
// webhook sits in k8s.io/apiserver's union authorizer between other
// authorizers; requests pass kube-apiserver's conditions-aware authorization
// filter and the AuthorizationConditionsEnforcer admission plugin, which calls
// kcedar back with an AuthorizationConditionsReview. Every answer kcedar sends
// must pass upstream's validation, and every decision must be the one `kcedar
// authorize` makes offline (internal/tools/offline) with the same objects.
//
// It is a module of its own, pinned to the v0.38.0-beta.0 modules (they need
// Go 1.27), with a replace to the repository's root module, whose packages it
// compiles against them. The root module's `go test ./...` does not enter it;
// `make kube138` runs it (GOTOOLCHAIN=go1.27.3 for this module only).
//
// kube-apiserver 1.38 itself cannot be built here, so two small pieces of
// k8s.io/kubernetes that no staging module carries are mirrored in
// upstream_test.go: the classifier of the requests that may be authorized
// conditionally (pkg/controlplane/apiserver/config.go) and the resources
// excluded from admission (pkg/kubeapiserver/admission/exclusion).
package kube138
