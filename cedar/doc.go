// Package cedar is kcedar's Kubernetes authorizer over Cedar policies, for
// use in process: an [Authorizer] implements k8s.io/apiserver's
// authorizer.Authorizer (Authorize, ConditionsAwareAuthorize,
// EvaluateConditions) and authorizer.RuleResolver, so an aggregated API
// server, or any component built on k8s.io/apiserver, can put kcedar in its
// own union authorizer with no webhook hop.
//
// A request becomes Cedar data exactly as kcedar's webhook sees it (the
// SubjectAccessReview that k8s.io/apiserver's webhook authorizer would send),
// and the policies are partially evaluated: a policy that depends on the
// object of a write, which authorization cannot see, leaves a residual.
// ConditionsAwareAuthorize returns those residuals as conditions (KEP-5681)
// signed by package residual; Authorize answers without them, as a caller
// that cannot evaluate conditions must: Deny if a deny condition remains,
// else NoOpinion. In k8s.io/apiserver v0.37 only the union and metrics
// wrappers call the conditions-aware methods; its request filters call
// Authorize, so an embedder gets the decision without conditions until
// upstream's filters use them.
//
// The conditions types are k8s.io/apiserver's alpha API: they pin an
// embedder to the k8s.io/apiserver minor version kcedar requires (see
// docs/versioning.md). In process, authorizer.ConditionsData holds
// runtime.Objects; kcedar reads them as the JSON the conditions callback
// would carry, so they must be the versioned (external) types, or
// unstructured.
//
// A policy's evaluation error is part of the decision, not an error of the
// authorizer: an erroring forbid denies, an erroring permit allows nothing,
// and the error is not returned (k8s.io/apiserver would answer 500 and show
// it to the client, where kcedar's webhook gets a 403). Authorize returns an
// error only for attributes kcedar cannot decide, or before a policy set is
// loaded, with a Deny.
//
// Reasons name the policy that decided ("kcedar: allowed by policy
// dev-reads"); a NoOpinion's reason has no "kcedar: " prefix, because
// k8s.io/apiserver's union authorizer prefixes it with the authorizer's
// name, as it does for kcedar's webhook.
//
// Policies are Cedar, written against the schema of package schemagen and
// validated against it when the Authorizer is made.
package cedar
