package replay

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kcedar/kcedar/internal/entities"
)

// resolver is kube-apiserver's request-info resolver, configured as the
// API server configures it: /api (the core group) and /apis.
var resolver = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// methodOf is the HTTP method a request of the audit verb came with; the
// resolver derives the verb from it (with the path and query: list, watch,
// deletecollection). Non-resource verbs are lower-case methods already.
func methodOf(verb string) string {
	switch verb {
	case "get", "list", "watch":
		return http.MethodGet
	case "create":
		return http.MethodPost
	case "update":
		return http.MethodPut
	case "patch":
		return http.MethodPatch
	case "delete", "deletecollection":
		return http.MethodDelete
	}
	return strings.ToUpper(verb)
}

// rebuild is the request the authorizer saw: the attributes the API
// server's resolver derives from requestURI and the verb (never objectRef:
// audit fills objectRef.name in from a create's body, the authorizer saw no
// name), and the effective user; converted as the webhook authorizer
// converts attributes into a SubjectAccessReview, then as kcedar's server
// reads one.
func (ev *auditEvent) rebuild() (*entities.Request, error) {
	spec, err := ev.sar()
	if err != nil {
		return nil, err
	}
	return entities.RequestFromSAR(spec)
}

// sar is the SubjectAccessReview spec the webhook authorizer sends for the
// event's request (see rebuild).
func (ev *auditEvent) sar() (*authorizationv1.SubjectAccessReviewSpec, error) {
	if ev.Verb == "" || ev.RequestURI == "" {
		return nil, fmt.Errorf("the event has no verb or requestURI")
	}
	u, err := url.ParseRequestURI(ev.RequestURI)
	if err != nil {
		return nil, fmt.Errorf("requestURI: %w", err)
	}
	info, err := resolver.NewRequestInfo(&http.Request{Method: methodOf(ev.Verb), URL: u})
	if err != nil {
		return nil, fmt.Errorf("requestURI %q: %w", ev.RequestURI, err)
	}
	user := ev.effectiveUser()
	spec := &authorizationv1.SubjectAccessReviewSpec{User: user.Username, UID: user.UID, Groups: user.Groups}
	if len(user.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	// The audit verb is the verb the authorizer saw (the resolver's).
	if !info.IsResourceRequest {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: info.Path, Verb: ev.Verb}
		return spec, nil
	}
	spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
		Namespace: info.Namespace, Verb: ev.Verb, Group: info.APIGroup, Version: info.APIVersion,
		Resource: info.Resource, Subresource: info.Subresource, Name: info.Name,
		FieldSelector: fieldSelectorOf(info.FieldSelector),
		LabelSelector: labelSelectorOf(info.LabelSelector),
	}
	return spec, nil
}

// fieldSelectorOf is a field selector as the webhook authorizer sends it:
// parsed as the API server's authorization filter parses it, = and == (and
// in) as In, != as NotIn, other operators dropped (requirements are ANDed,
// so dropping one only widens the request); nil when none is left or the
// selector does not parse.
func fieldSelectorOf(raw string) *authorizationv1.FieldSelectorAttributes {
	if raw == "" {
		return nil
	}
	sel, err := fields.ParseSelector(raw)
	if err != nil {
		return nil
	}
	var out []metav1.FieldSelectorRequirement
	for _, r := range sel.Requirements() {
		op := metav1.FieldSelectorOpIn
		switch r.Operator {
		case selection.Equals, selection.DoubleEquals, selection.In:
		case selection.NotEquals, selection.NotIn:
			op = metav1.FieldSelectorOpNotIn
		default:
			continue
		}
		out = append(out, metav1.FieldSelectorRequirement{Key: r.Field, Operator: op, Values: []string{r.Value}})
	}
	if len(out) == 0 {
		return nil
	}
	return &authorizationv1.FieldSelectorAttributes{Requirements: out}
}

// labelSelectorOf is a label selector as the webhook authorizer sends it
// (see fieldSelectorOf): = == in as In, != notin as NotIn, exists, !key as
// DoesNotExist; > and < dropped.
func labelSelectorOf(raw string) *authorizationv1.LabelSelectorAttributes {
	if raw == "" {
		return nil
	}
	sel, err := labels.Parse(raw)
	if err != nil {
		return nil
	}
	reqs, _ := sel.Requirements()
	var out []metav1.LabelSelectorRequirement
	for _, r := range reqs {
		var op metav1.LabelSelectorOperator
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			op = metav1.LabelSelectorOpIn
		case selection.NotEquals, selection.NotIn:
			op = metav1.LabelSelectorOpNotIn
		case selection.Exists:
			op = metav1.LabelSelectorOpExists
		case selection.DoesNotExist:
			op = metav1.LabelSelectorOpDoesNotExist
		default:
			continue
		}
		req := metav1.LabelSelectorRequirement{Key: r.Key(), Operator: op}
		if vs := r.ValuesUnsorted(); len(vs) > 0 {
			req.Values = vs
		}
		out = append(out, req)
	}
	if len(out) == 0 {
		return nil
	}
	return &authorizationv1.LabelSelectorAttributes{Requirements: out}
}

// resourceName is how a request's target is shown in a report: the
// resource with its group and subresource (deployments.apps/scale), or a
// non-resource path.
func resourceName(r *entities.Request) string {
	if !r.ResourceRequest {
		return r.Path
	}
	s := r.Resource
	if r.APIGroup != "" {
		s += "." + r.APIGroup
	}
	if r.Subresource != "" {
		s += "/" + r.Subresource
	}
	return s
}
