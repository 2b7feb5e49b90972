package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/upstream"
	"github.com/kcedar/kcedar/internal/wire"
)

// An authorizer other than kcedar's (a union holding kcedar's, say) is
// served through k8s.io/apiserver's interface alone: the SubjectAccessReview
// endpoint asks ConditionsAwareAuthorize and renders its decision, the
// callback hands the decision back to EvaluateConditions. This file is that
// path; kcedar's own authorizer takes the engine's (render.go), which also
// serves admission enforcement and the access reviews.

// authorizeUpstream answers a SubjectAccessReview with s.authz.
func (s *Server) authorizeUpstream(ctx context.Context, w http.ResponseWriter, spec *wire.SubjectAccessReviewSpec, req *entities.Request) {
	start := time.Now()
	d := s.authz.ConditionsAwareAuthorize(ctx, attributesOf(&spec.SubjectAccessReviewSpec))
	caller := s.sarCaller(spec)
	answer := renderUpstream(d, caller)
	if caller.Upstream {
		answer.Status = errorInReason(answer.Status)
	}
	s.metrics.authorizeDuration().Observe(time.Since(start).Seconds())
	s.metrics.authorizeDecisions.get(answer.Label).Inc()
	s.logDecision(req, answer, nil, 0, time.Since(start))
	traceAuthorize(s.recordingSpan(ctx), req, answer, nil, 0)
	writeSARResponse(w, answer.Status)
}

// renderUpstream renders d for caller: conditions only to a caller that
// takes them, otherwise d folded (Deny where a deny condition remains, else
// NoOpinion).
func renderUpstream(d authorizer.ConditionsAwareDecision, caller sarCaller) sarAnswer {
	if !d.IsUnconditional() {
		w := upstream.Wire(d)
		if caller.Upstream && wire.Validate(&w) == nil {
			return sarAnswer{Status: wire.SubjectAccessReviewStatus{ConditionalDecision: &w}, Label: labelConditional}
		}
		d = authorizer.ConditionsAwareDecisionFromParts(d.FailureDecision(), "failed closed: the conditions cannot be sent to this caller", nil)
	}
	var st authorizationv1.SubjectAccessReviewStatus
	st.Reason = d.Reason()
	if err := d.Error(); err != nil {
		st.EvaluationError = err.Error()
	}
	label := "Deny"
	switch {
	case d.IsAllow():
		st.Allowed, label = true, "Allow"
	case d.IsNoOpinion():
		st.Reason, label = apiServerReason(true, st.Reason), "NoOpinion"
	default:
		st.Denied = true
	}
	return sarAnswer{Status: wire.SubjectAccessReviewStatus{SubjectAccessReviewStatus: st}, Label: label}
}

// attributesOf is spec as the attributes kube-apiserver hands an
// authorizer: the user, the request, and the selectors' requirements
// (only those the attributes can hold; a selector only narrows, so one left
// out asks about more, never less).
func attributesOf(spec *authorizationv1.SubjectAccessReviewSpec) authorizer.AttributesRecord {
	u := &user.DefaultInfo{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	if len(spec.Extra) > 0 {
		u.Extra = make(map[string][]string, len(spec.Extra))
		for k, v := range spec.Extra {
			u.Extra[k] = v
		}
	}
	if na := spec.NonResourceAttributes; na != nil {
		return authorizer.AttributesRecord{User: u, Verb: na.Verb, Path: na.Path}
	}
	ra := spec.ResourceAttributes
	if ra == nil {
		return authorizer.AttributesRecord{User: u}
	}
	a := authorizer.AttributesRecord{User: u, Verb: ra.Verb, Namespace: ra.Namespace, APIGroup: ra.Group, APIVersion: ra.Version,
		Resource: ra.Resource, Subresource: ra.Subresource, Name: ra.Name, ResourceRequest: true}
	if fs := ra.FieldSelector; fs != nil {
		a.FieldSelectorRequirements = fieldRequirements(fs.Requirements)
	}
	if ls := ra.LabelSelector; ls != nil {
		a.LabelSelectorRequirements, a.LabelSelectorParsingErr = labelRequirements(ls.Requirements)
	}
	return a
}

// fieldRequirements are a review's field selector requirements as parsed
// ones: a single value In is "=", NotIn "!=" (fields.Requirement holds one
// value; others are left out).
func fieldRequirements(reqs []metav1.FieldSelectorRequirement) fields.Requirements {
	var out fields.Requirements
	for _, r := range reqs {
		if len(r.Values) != 1 {
			continue
		}
		switch r.Operator {
		case metav1.FieldSelectorOpIn:
			out = append(out, fields.Requirement{Operator: selection.Equals, Field: r.Key, Value: r.Values[0]})
		case metav1.FieldSelectorOpNotIn:
			out = append(out, fields.Requirement{Operator: selection.NotEquals, Field: r.Key, Value: r.Values[0]})
		}
	}
	return out
}

// labelOperators maps a review's label selector operators to parsed ones.
var labelOperators = map[metav1.LabelSelectorOperator]selection.Operator{
	metav1.LabelSelectorOpIn: selection.In, metav1.LabelSelectorOpNotIn: selection.NotIn,
	metav1.LabelSelectorOpExists: selection.Exists, metav1.LabelSelectorOpDoesNotExist: selection.DoesNotExist,
}

// labelRequirements are a review's label selector requirements as parsed
// ones; the first that does not parse is the error (the rest still count).
func labelRequirements(reqs []metav1.LabelSelectorRequirement) (labels.Requirements, error) {
	var out labels.Requirements
	var first error
	for _, r := range reqs {
		op, ok := labelOperators[r.Operator]
		if !ok {
			continue
		}
		req, err := labels.NewRequirement(r.Key, op, r.Values)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		out = append(out, *req)
	}
	return out, first
}

// evaluateUpstream answers the callback's upstream shape with s.authz.
func (s *Server) evaluateUpstream(ctx context.Context, req *wire.AuthorizationConditionsRequest) *wire.AuthorizationConditionsResponse {
	decision, err := upstream.FromWire(req.Decision)
	var t authorizer.Decision
	var reason string
	if err == nil {
		t, reason, err = s.authz.EvaluateConditions(ctx, decision, admissionConditionsData{req.AdmissionRequest})
	} else {
		t, reason = authorizer.DecisionDeny, "kcedar: malformed decision"
	}
	details := &wire.DecisionDetails{Reason: reason}
	if err != nil {
		details.Reason = upstream.ReasonWithError(reason, err.Error())
	}
	dec := wire.ConditionsAwareDecision{Type: wire.DecisionTypeDeny, Deny: details}
	switch t {
	case authorizer.DecisionAllow:
		dec = wire.ConditionsAwareDecision{Type: wire.DecisionTypeAllow, Allow: details}
	case authorizer.DecisionNoOpinion:
		details.Reason = apiServerReason(true, details.Reason)
		dec = wire.ConditionsAwareDecision{Type: wire.DecisionTypeNoOpinion, NoOpinion: details}
	}
	return &wire.AuthorizationConditionsResponse{UID: req.AdmissionRequest.UID, Decision: dec}
}

// admissionConditionsData is an AdmissionRequest as k8s.io/apiserver's
// ConditionsData: the objects decoded as unstructured.
type admissionConditionsData struct{ a *admissionv1.AdmissionRequest }

func (d admissionConditionsData) GetName() string      { return d.a.Name }
func (d admissionConditionsData) GetNamespace() string { return d.a.Namespace }
func (d admissionConditionsData) GetResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: d.a.Resource.Group, Version: d.a.Resource.Version, Resource: d.a.Resource.Resource}
}
func (d admissionConditionsData) GetSubresource() string { return d.a.SubResource }
func (d admissionConditionsData) GetOperation() authorizer.AdmissionOperation {
	return authorizer.AdmissionOperation(d.a.Operation)
}
func (d admissionConditionsData) GetOperationOptions() runtime.Object {
	return rawObject(d.a.Options.Raw)
}
func (d admissionConditionsData) IsDryRun() bool               { return d.a.DryRun != nil && *d.a.DryRun }
func (d admissionConditionsData) GetObject() runtime.Object    { return rawObject(d.a.Object.Raw) }
func (d admissionConditionsData) GetOldObject() runtime.Object { return rawObject(d.a.OldObject.Raw) }
func (d admissionConditionsData) GetKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: d.a.Kind.Group, Version: d.a.Kind.Version, Kind: d.a.Kind.Kind}
}
func (d admissionConditionsData) GetUserInfo() user.Info {
	u := &user.DefaultInfo{Name: d.a.UserInfo.Username, UID: d.a.UserInfo.UID, Groups: d.a.UserInfo.Groups}
	if len(d.a.UserInfo.Extra) > 0 {
		u.Extra = make(map[string][]string, len(d.a.UserInfo.Extra))
		for k, v := range d.a.UserInfo.Extra {
			u.Extra[k] = v
		}
	}
	return u
}

// rawObject is raw JSON as an unstructured object, nil when absent or not
// an object.
func rawObject(raw []byte) runtime.Object {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers stay exact, as the JSON had them
	var content map[string]any
	if dec.Decode(&content) != nil {
		return nil
	}
	return &unstructured.Unstructured{Object: content}
}
