// Package replay compares a policy set's decisions with what happened: it
// reads kube-apiserver audit logs (audit.k8s.io/v1 Event JSON lines, gzipped
// or not), rebuilds each request as the authorizer saw it (from requestURI
// and verb, with the API server's own request-info resolver), decides it
// through the engine, as kcedar serve decides, and counts where the
// decision differs from the authorization.k8s.io/decision annotation.
package replay
