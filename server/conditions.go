package server

import (
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/upstream"
	"github.com/kcedar/kcedar/internal/wire"
	"github.com/kcedar/kcedar/residual"
)

var conditionsReviewType = typeMeta{APIVersion: wire.ConditionsReviewVersion, Kind: wire.ConditionsReviewKind}

type conditionsReviewRequest struct {
	typeMeta
	Request *wire.AuthorizationConditionsRequest `json:"request"`
}

// conditionsHandler answers the KEP's callback: the decision an authorizer
// returned, evaluated by ev against the admission request.
func (e *endpoint) conditionsHandler(ev ConditionsEvaluator) http.Handler {
	e.metrics.countBadRequestsOf("conditions")
	return e.webhook("conditions", func(w http.ResponseWriter, r *http.Request) { e.serveConditions(w, r, ev) })
}

func (e *endpoint) serveConditions(w http.ResponseWriter, r *http.Request, ev ConditionsEvaluator) {
	var review conditionsReviewRequest
	if !e.decodeWebhook(w, r, "conditions", &review, func() error { return checkType(review.typeMeta, conditionsReviewType) }) {
		return
	}
	req := review.Request
	switch {
	case req == nil:
		e.writeError(w, "conditions", badRequest("request is missing"))
		return
	case req.UnsupportedConditionSets != nil:
		e.writeError(w, "conditions", badRequest("request.conditionSets is not a Kubernetes field (an early KEP-5681 proposal): "+
			"send request.decision and request.admissionRequest, as Kubernetes 1.38 does"))
		return
	case req.Decision == nil:
		e.writeError(w, "conditions", badRequest("request.decision is missing"))
		return
	case req.AdmissionRequest == nil:
		e.writeError(w, "conditions", badRequest("request.admissionRequest is missing"))
		return
	}
	start := time.Now()
	details := new(cedar.Details)
	var t authorizer.Decision
	var reason string
	decision, err := upstream.FromWire(req.Decision)
	if err == nil {
		t, reason, err = ev.EvaluateConditions(cedar.WithDetails(r.Context(), details), decision, conditionsData(req.AdmissionRequest))
	} else {
		t, reason = authorizer.DecisionDeny, "kcedar: malformed decision"
	}
	resp := conditionsResponse(t, reason, err, req.AdmissionRequest.UID)
	label := decisionLabel(t)
	traceConditions(e.recordingSpan(r.Context()), req, label, details)
	e.metrics.decisions.WithLabelValues("conditions", label).Inc()
	e.metrics.decisionDuration.WithLabelValues("conditions").Observe(time.Since(start).Seconds())
	writeJSON(w, wire.AuthorizationConditionsReview{
		TypeMeta: metav1.TypeMeta{APIVersion: wire.ConditionsReviewVersion, Kind: wire.ConditionsReviewKind},
		Response: resp,
	})
}

// conditionsData is an AdmissionRequest as the conditions are evaluated
// against it: its objects as the JSON it carries (runtime.Unknown), read
// as they came.
func conditionsData(a *admissionv1.AdmissionRequest) residual.ConditionsRecord {
	u := &user.DefaultInfo{Name: a.UserInfo.Username, UID: a.UserInfo.UID, Groups: a.UserInfo.Groups}
	if len(a.UserInfo.Extra) > 0 {
		u.Extra = make(map[string][]string, len(a.UserInfo.Extra))
		for k, v := range a.UserInfo.Extra {
			u.Extra[k] = v
		}
	}
	return residual.ConditionsRecord{
		Operation:   authorizer.AdmissionOperation(a.Operation),
		Resource:    schema.GroupVersionResource{Group: a.Resource.Group, Version: a.Resource.Version, Resource: a.Resource.Resource},
		Subresource: a.SubResource,
		Kind:        schema.GroupVersionKind{Group: a.Kind.Group, Version: a.Kind.Version, Kind: a.Kind.Kind},
		Namespace:   a.Namespace, Name: a.Name,
		Object: rawObject(a.Object.Raw), OldObject: rawObject(a.OldObject.Raw), OperationOptions: rawObject(a.Options.Raw),
		DryRun:   a.DryRun != nil && *a.DryRun,
		UserInfo: u,
	}
}

// rawObject is raw JSON as an object, nil when there is none.
func rawObject(raw []byte) runtime.Object {
	if len(raw) == 0 {
		return nil
	}
	return &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
}
