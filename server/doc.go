// Package server is kcedar's webhook service: an http.Handler over an
// authorizer, and the one place where decisions are rendered for the wire.
// Each endpoint has its own handler over the interface it needs: a
// k8s.io/apiserver authorizer.Authorizer (kcedar's cedar.Authorizer, or a
// union holding it), a ConditionsEvaluator, an Admitter, a Reviewer. [New]
// puts them on one mux. Its endpoints:
//
//   - POST /v1/authorize: kube-apiserver's authorization webhook
//     (SubjectAccessReview). The status carries a conditionalDecision to a
//     caller that handles conditions (KEP-5681, Kubernetes 1.38), and
//     otherwise the decision without its conditions (Deny if a deny
//     condition remains, else NoOpinion); with admission
//     enforcement, a conditional allow the admission webhook will enforce is
//     answered allowed.
//   - POST /v1/conditions: the conditions callback, evaluated with the keys
//     and the schema only, so it answers whatever policy set serves, or
//     none.
//   - POST /v1/admit (Options.Admitter): the validating admission webhook
//     that enforces conditions on clusters without conditional
//     authorization.
//   - POST /v1/resourceaccessreview and /v1/rulesreview
//     (Options.Reviewer): who can make a request, and what a subject can do.
//   - GET /healthz, /livez and /readyz. Metrics go to the registry the
//     caller passes in (Options.Registerer), which it serves itself.
//
// Bodies are bounded and checked before they are decoded; anything
// malformed is a 4xx, and no panic escapes the handler. Serve it over TLS
// ([TLSOptions]) and, for the webhook endpoints, only to verified clients
// (Options.RequireClientCert).
package server
