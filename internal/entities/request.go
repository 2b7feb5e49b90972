package entities

import (
	"fmt"
	"sort"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UserInfo is the authenticated user a request is made for.
type UserInfo struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Request is a Kubernetes authorization request in kcedar's terms: either a
// resource request (Resource set) or a non-resource request (Path set).
type Request struct {
	User UserInfo
	Verb string

	// Resource requests.
	ResourceRequest bool
	APIGroup        string
	APIVersion      string
	Resource        string
	Subresource     string
	Namespace       string // "" on a namespaced resource means all namespaces
	Name            string // "" means all names (or a name not known yet)
	// NameFromSelector is set when Name comes from a field selector, not
	// from the request itself: the request still names no object (Named).
	NameFromSelector bool
	// LabelSelector is the label selector of a list, watch or
	// deletecollection (KEP-4601): the objects it touches satisfy it.
	LabelSelector []LabelRequirement

	// Non-resource requests.
	Path string

	// UnconditionalOnly: the caller counts only rights held without
	// conditions. The SubjectAccessReview carried UnconditionalOnlyExtra
	// (kcedar's escalation check asks this way, so a right granted only on
	// conditions is never counted as held, in any serving mode), or the
	// caller cannot evaluate conditions at all. The engine then decides
	// folded (Decision.FailureDecision): never Conditional, and without
	// evaluating what could only become a condition.
	UnconditionalOnly bool
}

// UnconditionalOnlyExtra is the user-info extra key by which a
// SubjectAccessReview asks kcedar to count only unconditional rights: a
// conditional allow is folded (NoOpinion, or Deny where a deny condition
// remains) whatever the serving mode, as for a caller that cannot evaluate
// conditions. kcedar removes the key before deciding, so policies never see
// it. It can only make an answer stricter, so a client that sends it on a
// real request only loses access. Because kube-apiserver's webhook cache is
// keyed on the whole review, extra included, an answer cached for a real
// request never stands in for one that carries it.
const UnconditionalOnlyExtra = "kcedar.dev/unconditional-only"

// Named reports whether a resource request names an object (resource.named):
// RBAC matches "" in resourceNames exactly when it does not.
func (r *Request) Named() bool { return r.Name != "" && !r.NameFromSelector }

// Wildcard is how Kubernetes spells "every value" in verbs, groups and resources.
const Wildcard = "*"

// RequestFromSAR converts a SubjectAccessReview spec. A field selector
// requirement on metadata.name / metadata.namespace with operator In and a
// single value (kube-apiserver sends `=` and `==` that way) makes an open name
// or namespace known: the request can then only ever touch objects with that
// name or namespace. Other operators, several values, the raw selector and
// label selectors change nothing.
func RequestFromSAR(spec *authorizationv1.SubjectAccessReviewSpec) (*Request, error) {
	if spec == nil {
		return nil, fmt.Errorf("spec is missing")
	}
	r := &Request{User: UserInfo{Name: spec.User, UID: spec.UID, Groups: spec.Groups}}
	if len(spec.Extra) > 0 {
		r.User.Extra = make(map[string][]string, len(spec.Extra))
		for k, v := range spec.Extra {
			if k == UnconditionalOnlyExtra {
				r.UnconditionalOnly = true
				continue
			}
			r.User.Extra[k] = v
		}
		if len(r.User.Extra) == 0 {
			r.User.Extra = nil
		}
	}
	switch {
	case spec.ResourceAttributes != nil && spec.NonResourceAttributes != nil:
		return nil, fmt.Errorf("spec has both resourceAttributes and nonResourceAttributes")
	case spec.ResourceAttributes != nil:
		ra := spec.ResourceAttributes
		r.ResourceRequest = true
		r.Verb = ra.Verb
		r.APIGroup, r.APIVersion = ra.Group, ra.Version
		r.Resource, r.Subresource = ra.Resource, ra.Subresource
		r.Namespace, r.Name = ra.Namespace, ra.Name
		r.LabelSelector = labelSelectorOf(ra.LabelSelector)
		if ra.FieldSelector != nil {
			// Only an open name or namespace is narrowed; an explicit one stays.
			for _, req := range ra.FieldSelector.Requirements {
				v, ok := singleValue(req)
				if !ok {
					continue
				}
				switch {
				case req.Key == "metadata.name" && r.Name == "":
					r.Name, r.NameFromSelector = v, true
				case req.Key == "metadata.namespace" && r.Namespace == "":
					r.Namespace = v
				}
			}
		}
	case spec.NonResourceAttributes != nil:
		r.Verb = spec.NonResourceAttributes.Verb
		r.Path = spec.NonResourceAttributes.Path
	default:
		return nil, fmt.Errorf("spec has neither resourceAttributes nor nonResourceAttributes")
	}
	if r.Verb == "" {
		return nil, fmt.Errorf("verb is empty")
	}
	if r.User.Name == "" && len(r.User.Groups) == 0 {
		return nil, fmt.Errorf("user and groups are empty")
	}
	return r, nil
}

func singleValue(req metav1.FieldSelectorRequirement) (string, bool) {
	if req.Operator == metav1.FieldSelectorOpIn && len(req.Values) == 1 && req.Values[0] != "" {
		return req.Values[0], true
	}
	return "", false
}

// String is a short description for logs.
func (r *Request) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "user=%q groups=%v verb=%q", r.User.Name, r.User.Groups, r.Verb)
	if !r.ResourceRequest {
		fmt.Fprintf(&b, " path=%q", r.Path)
		return b.String()
	}
	fmt.Fprintf(&b, " group=%q resource=%q", r.APIGroup, r.Resource)
	if r.Subresource != "" {
		fmt.Fprintf(&b, " subresource=%q", r.Subresource)
	}
	fmt.Fprintf(&b, " namespace=%q name=%q", r.Namespace, r.Name)
	return b.String()
}

// sortedExtraKeys returns the keys of extra in order.
func sortedExtraKeys(extra map[string][]string) []string {
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
