package tracing

import "go.opentelemetry.io/otel/attribute"

// Span names: one span per webhook call kcedar serves.
const (
	// SpanAuthorize: a SubjectAccessReview (POST /v1/authorize).
	SpanAuthorize = "kcedar.authorize"
	// SpanConditions: the conditions callback (POST /v1/conditions).
	SpanConditions = "kcedar.conditions"
	// SpanAdmit: the admission review that enforces conditions
	// (POST /v1/admit, --admission-enforcement).
	SpanAdmit = "kcedar.admit"
	// SpanValidatePolicy: the admission review of a policy object's write
	// (POST /v1/validate-policy).
	SpanValidatePolicy = "kcedar.validate_policy"
)

// SpanName is the span name of the webhook endpoint named endpoint (the
// server's metric label: authorize, conditions, admit, validate-policy,
// ...): kcedar.<endpoint> with '_' for '-'.
func SpanName(endpoint string) string {
	switch endpoint {
	case "authorize":
		return SpanAuthorize
	case "conditions":
		return SpanConditions
	case "admit":
		return SpanAdmit
	case "validate-policy":
		return SpanValidatePolicy
	}
	b := []byte("kcedar." + endpoint)
	for i, c := range b {
		if c == '-' {
			b[i] = '_'
		}
	}
	return string(b)
}

// Attribute keys of kcedar's spans. Where OpenTelemetry's semantic
// conventions name the thing (k8s.namespace.name, user.name, url.path,
// http.response.status_code) their key is used; the rest are kcedar's.
const (
	// Decision is the answer: Allow, Deny, NoOpinion, Conditional or
	// ConditionalAllow (as the metrics and decision log name it).
	Decision = attribute.Key("kcedar.decision")
	// PolicyIDs are the ids of the policies that decided.
	PolicyIDs = attribute.Key("kcedar.policy_ids")
	// Cache is the decision cache's part: hit, miss or none.
	Cache = attribute.Key("kcedar.cache")
	// Candidates is the number of candidate policies evaluated.
	Candidates = attribute.Key("kcedar.candidates")
	// Conditions is the number of conditions: returned (authorize) or
	// evaluated (conditions callback).
	Conditions = attribute.Key("kcedar.conditions")
	// Errors is the number of policy evaluation errors.
	Errors = attribute.Key("kcedar.errors")
	// Generation is the generation of the policy set that decided.
	Generation = attribute.Key("kcedar.policy_generation")
	// Refusal is why a policy object's write was refused.
	Refusal = attribute.Key("kcedar.refusal")
	// PolicyObject names the policy object of a validate_policy span
	// (kind/namespace/name as the policy sources name it).
	PolicyObject = attribute.Key("kcedar.policy_object")

	// UserName is the requesting user.
	UserName = attribute.Key("user.name")
	// GroupsCount is the number of the user's groups (not the groups: the
	// list can be long and is in the API server's audit log).
	GroupsCount = attribute.Key("kcedar.user.groups_count")
	// Verb is the request's verb (get, list, create, ...).
	Verb = attribute.Key("kcedar.verb")
	// Operation is an admission request's operation (CREATE, UPDATE, ...).
	Operation = attribute.Key("kcedar.operation")
	// APIGroup, Resource, Subresource and Name: the resource requested.
	APIGroup    = attribute.Key("kcedar.api_group")
	Resource    = attribute.Key("kcedar.resource")
	Subresource = attribute.Key("kcedar.subresource")
	Name        = attribute.Key("kcedar.name")
	// Namespace is the request's namespace.
	Namespace = attribute.Key("k8s.namespace.name")
	// Path is a non-resource request's path.
	Path = attribute.Key("url.path")
	// StatusCode is the HTTP status of kcedar's answer.
	StatusCode = attribute.Key("http.response.status_code")
)
