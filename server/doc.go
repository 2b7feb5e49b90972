// Package server is kcedar's webhook service: an http.Handler over an
// authorizer, and the one place where decisions are rendered for the wire.
// It serves kcedar's cedar.Authorizer on every endpoint below; any other
// k8s.io/apiserver authorizer.Authorizer (a union holding kcedar's, say) on
// the SubjectAccessReview and callback endpoints, through that interface
// alone. Its endpoints:
//
//   - POST /v1/authorize: kube-apiserver's authorization webhook
//     (SubjectAccessReview). The status carries a conditionalDecision to a
//     caller that handles conditions (KEP-5681, Kubernetes 1.38), and
//     otherwise the decision with its conditions folded; with admission
//     enforcement, a conditional allow the admission webhook will enforce is
//     answered allowed.
//   - POST /v1/conditions: the conditions callback, evaluated with the keys
//     and the schema only, so it answers whatever policy set serves, or
//     none.
//   - POST /v1/admit (kcedar's authorizer): the validating admission webhook
//     that enforces conditions on clusters without conditional
//     authorization.
//   - POST /v1/resourceaccessreview and /v1/rulesreview (kcedar's
//     authorizer): who can make a request, and what a subject can do.
//   - GET /healthz, /livez, /readyz and /metrics (Prometheus).
//
// Bodies are bounded and checked before they are decoded; anything
// malformed is a 4xx, and no panic escapes the handler. Serve it over TLS
// ([TLSOptions]) and, for the webhook endpoints, only to verified clients
// (Options.RequireClientCert).
package server
