// Package generate writes least-privilege Cedar policies from what audit
// logs show was used (kcedar generate): per subject, the verbs, resources,
// namespaces and names of the requests the cluster allowed, merged as a
// person would write them, minus what a given policy set already allows,
// and never anything a logged forbidden request of the same subject would
// need. The records come from package replay's reader (the CLI joins them):
// each request as kube-apiserver's authorizer saw it.
//
// Memory grows with the distinct permissions (subject, target, verb,
// namespace, name), not with the events: events are folded into counts,
// first and last seen, and never kept.
package generate
