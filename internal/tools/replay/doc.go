// Package replay compares a policy set's decisions with what happened: it
// reads kube-apiserver audit logs (audit.k8s.io/v1 or v1beta1 Event JSON
// lines, kind-only events, Azure kube-audit records; gzipped or not),
// rebuilds each request as the authorizer saw it (from requestURI and verb,
// with the API server's own request-info resolver), leaves out those kcedar
// never sees (system:masters, the webhook's matchConditions: Reach), decides
// it as kube-apiserver's authorizer chain would (upstream.Chain: kcedar as
// kcedar serve answers in its mode, then, on its NoOpinion, the cluster's
// RBAC as converted permits, when Options.RBAC gives them), and counts
// where the decision differs from the authorization.k8s.io/decision
// annotation (or, in logs without it, the response code, a hint). Each
// request is decided once, its ResponseStarted and ResponseComplete events
// paired by auditID. ReadRequests gives the same requests to other tools.
package replay
