// Package upstream converts between k8s.io/apiserver's in-process
// authorizer types (authorizer.Attributes, ConditionsAwareDecision,
// ConditionsData, rule infos) and kcedar's: a request becomes the
// SubjectAccessReview kube-apiserver's webhook authorizer would send, so an
// embedded authorizer decides exactly as the webhook does; conditions travel
// as upstream GenericConditions holding kcedar's signed text; admission data
// becomes the JSON the conditions callback reads.
package upstream
