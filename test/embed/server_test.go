package embed_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/plugin/pkg/authorizer/webhook"
	webhookmetrics "k8s.io/apiserver/plugin/pkg/authorizer/webhook/metrics"
	"k8s.io/client-go/rest"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/server"
)

// The KEP-5681 wire shapes, written out here as a caller sees them (kcedar's
// own are internal): spec.authorizationOptions and status.conditionalDecision
// of a SubjectAccessReview, and the AuthorizationConditionsReview callback.

type wireDecision struct {
	Type          string             `json:"type"`
	Allow         *wireDetails       `json:"allow,omitempty"`
	Deny          *wireDetails       `json:"deny,omitempty"`
	NoOpinion     *wireDetails       `json:"noOpinion,omitempty"`
	ConditionsMap *wireConditionsMap `json:"conditionsMap,omitempty"`
	Union         []json.RawMessage  `json:"union,omitempty"`
}

type wireDetails struct {
	Reason          string `json:"reason,omitempty"`
	EvaluationError string `json:"evaluationError,omitempty"`
}

type wireConditionsMap struct {
	DenyConditions      []wireCondition `json:"denyConditions,omitempty"`
	NoOpinionConditions []wireCondition `json:"noOpinionConditions,omitempty"`
	AllowConditions     []wireCondition `json:"allowConditions,omitempty"`
}

type wireCondition struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	Condition   string `json:"condition"`
	Description string `json:"description,omitempty"`
}

type authorizationOptions struct {
	HandledDecisionTypes []string `json:"handledDecisionTypes,omitempty"`
}

type sarSpec struct {
	authorizationv1.SubjectAccessReviewSpec
	AuthorizationOptions *authorizationOptions `json:"authorizationOptions,omitempty"`
}

type sarStatus struct {
	authorizationv1.SubjectAccessReviewStatus
	ConditionalDecision *wireDecision `json:"conditionalDecision,omitempty"`
}

type subjectAccessReview struct {
	metav1.TypeMeta `json:",inline"`
	Spec            sarSpec   `json:"spec"`
	Status          sarStatus `json:"status,omitempty"`
}

type conditionsReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *conditionsRequest  `json:"request,omitempty"`
	Response        *conditionsResponse `json:"response,omitempty"`
}

type conditionsRequest struct {
	Decision         *wireDecision                 `json:"decision,omitempty"`
	AdmissionRequest *admissionv1.AdmissionRequest `json:"admissionRequest,omitempty"`
}

type conditionsResponse struct {
	UID      types.UID     `json:"uid"`
	Decision *wireDecision `json:"decision"`
}

// serve serves kc over HTTPS with package server.
func serve(t *testing.T, kc *cedar.Authorizer) *httptest.Server {
	t.Helper()
	handler, err := server.New(kc, server.Options{Logger: slog.New(slog.DiscardHandler), Admitter: kc, Reviewer: kc})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(handler)
	t.Cleanup(srv.Close)
	return srv
}

// post sends in as JSON to path and decodes the 200 answer into out.
func post(t *testing.T, srv *httptest.Server, path string, in, out any) {
	t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Post(srv.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s: %s", path, resp.Status, data)
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" {
		t.Errorf("POST %s: Content-Type %q", path, resp.Header.Get("Content-Type"))
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("POST %s: %v: %s", path, err, data)
	}
}

// reviewOf is the SubjectAccessReview of attrs, as k8s.io/apiserver's
// webhook authorizer writes it.
func reviewOf(a authorizer.AttributesRecord, opts *authorizationOptions) subjectAccessReview {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User: a.User.GetName(), UID: a.User.GetUID(), Groups: a.User.GetGroups(),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.Namespace, Verb: a.Verb, Group: a.APIGroup, Version: a.APIVersion,
			Resource: a.Resource, Subresource: a.Subresource, Name: a.Name,
		},
	}
	return subjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec:     sarSpec{SubjectAccessReviewSpec: spec, AuthorizationOptions: opts},
	}
}

// statusDecision is the decision a SubjectAccessReview status says.
func statusDecision(st authorizationv1.SubjectAccessReviewStatus) authorizer.Decision {
	switch {
	case st.Denied:
		return authorizer.DecisionDeny
	case st.Allowed:
		return authorizer.DecisionAllow
	}
	return authorizer.DecisionNoOpinion
}

// apiServerReason is an in-process reason as the server sends it: a
// NoOpinion's reason goes without kcedar's prefix, which kube-apiserver's
// union adds back with the authorizer's name (server/render.go).
func apiServerReason(d authorizer.Decision, reason string) string {
	if d == authorizer.DecisionNoOpinion {
		return strings.TrimPrefix(reason, "kcedar: ")
	}
	return reason
}

// TestServerSubjectAccessReview: the server answers every request as the
// in-process authorizer decides it.
func TestServerSubjectAccessReview(t *testing.T) {
	kc := newKcedar(t, keyring(t))
	srv := serve(t, kc)
	ctx := context.Background()
	for _, c := range unconditionalCases {
		t.Run(c.name, func(t *testing.T) {
			want, reason, err := kc.Authorize(ctx, c.attrs)
			if want != c.kcedar || err != nil {
				t.Fatalf("in process: %v, %q, %v; want %v", want, reason, err, c.kcedar)
			}
			// Without authorizationOptions (a caller that takes no
			// conditions), and with them: only the conditional request
			// differs, and TestServerConditions covers it.
			for _, opts := range []*authorizationOptions{nil, {HandledDecisionTypes: []string{"Allow", "Deny", "NoOpinion"}}} {
				var got subjectAccessReview
				post(t, srv, "/v1/authorize", reviewOf(c.attrs, opts), &got)
				st := got.Status
				if d := statusDecision(st.SubjectAccessReviewStatus); d != want || (st.Allowed && st.Denied) {
					t.Errorf("options %v: allowed %v denied %v; in process %v", opts, st.Allowed, st.Denied, want)
				}
				if r := apiServerReason(want, reason); st.Reason != r || st.EvaluationError != "" {
					t.Errorf("options %v: reason %q, evaluationError %q; in process %q", opts, st.Reason, st.EvaluationError, r)
				}
				if st.ConditionalDecision != nil {
					t.Errorf("options %v: conditionalDecision %+v", opts, st.ConditionalDecision)
				}
				if got.APIVersion != "authorization.k8s.io/v1" || got.Kind != "SubjectAccessReview" {
					t.Errorf("answer is %s %s", got.APIVersion, got.Kind)
				}
			}
		})
	}
}

// TestServerBehindWebhookAuthorizer: k8s.io/apiserver's own webhook
// authorizer, calling the server over HTTPS, decides as the in-process
// authorizer does, alone and in the union.
func TestServerBehindWebhookAuthorizer(t *testing.T) {
	kc := newKcedar(t, keyring(t))
	srv := serve(t, kc)
	cfg := &rest.Config{
		Host:            srv.URL + "/v1/authorize",
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
	}
	wh, err := webhook.New(cfg, "v1", 0, 0, wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 1},
		authorizer.DecisionDeny, nil, "kcedar", webhookmetrics.NoopAuthorizerMetrics{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	inProcess, _ := chains(t, kc)
	overHTTPS, _ := chains(t, wh)
	ctx := context.Background()
	for _, c := range unconditionalCases {
		for _, a := range []struct {
			name             string
			local, webhooked authorizer.Authorizer
		}{{"alone", kc, wh}, {"in the union", inProcess, overHTTPS}} {
			want, wantReason, _ := a.local.Authorize(ctx, c.attrs)
			got, reason, err := a.webhooked.Authorize(ctx, c.attrs)
			if got != want || err != nil {
				t.Errorf("%s, %s: webhook %v, %q, %v; in process %v, %q", c.name, a.name, got, reason, err, want, wantReason)
			}
			// Reasons agree, but for kcedar's own NoOpinion in the union:
			// the server drops kcedar's prefix, which the union adds
			// back; the in-process reason keeps it, so the union's reads
			// "kcedar: kcedar: ...".
			if a.local == kc {
				wantReason = apiServerReason(want, wantReason)
			} else if want == authorizer.DecisionNoOpinion {
				continue
			}
			if reason != wantReason {
				t.Errorf("%s, %s: webhook reason %q; in process %q", c.name, a.name, reason, wantReason)
			}
		}
	}
}

// TestServerConditions: a caller that handles ConditionsMap and Union gets
// the conditions the in-process authorizer returns, byte for byte (the same
// keys sign the same request), and the callback evaluates them as
// EvaluateConditions does.
func TestServerConditions(t *testing.T) {
	kc := newKcedar(t, keyring(t))
	srv := serve(t, kc)
	ctx := context.Background()

	local := kc.ConditionsAwareAuthorize(ctx, bobCreatesPod)
	checkConditionsMap(t, local)

	var got subjectAccessReview
	post(t, srv, "/v1/authorize", reviewOf(bobCreatesPod, &authorizationOptions{HandledDecisionTypes: []string{"Allow", "Deny", "NoOpinion", "ConditionsMap", "Union"}}), &got)
	st := got.Status
	if st.Allowed || st.Denied {
		t.Errorf("conditional answer: allowed %v denied %v, want neither", st.Allowed, st.Denied)
	}
	dec := st.ConditionalDecision
	if dec == nil || dec.Type != "ConditionsMap" || dec.ConditionsMap == nil {
		t.Fatalf("conditionalDecision %+v, want a ConditionsMap", dec)
	}
	m := dec.ConditionsMap
	if len(m.DenyConditions) != 0 || len(m.NoOpinionConditions) != 0 || len(m.AllowConditions) != 1 {
		t.Fatalf("conditions map %+v, want one allow condition", m)
	}
	var want wireCondition
	for c := range local.ConditionsMap().AllowConditions() {
		want = wireCondition{ID: c.GetID(), Type: c.GetType(), Condition: c.GetCondition(), Description: c.GetDescription()}
	}
	if m.AllowConditions[0] != want {
		t.Errorf("over HTTPS the allow condition is\n%+v\nin process\n%+v", m.AllowConditions[0], want)
	}

	// A caller that handles ConditionsMap but not Union gets the folded
	// decision, as Authorize gives it.
	var folded subjectAccessReview
	post(t, srv, "/v1/authorize", reviewOf(bobCreatesPod, &authorizationOptions{HandledDecisionTypes: []string{"ConditionsMap"}}), &folded)
	if d, _, _ := kc.Authorize(ctx, bobCreatesPod); statusDecision(folded.Status.SubjectAccessReviewStatus) != d || folded.Status.ConditionalDecision != nil {
		t.Errorf("ConditionsMap only: status %+v; in process %v", folded.Status, d)
	}

	// The conditions received over HTTPS, as upstream's webhook authorizer
	// would hold them in process.
	received := authorizer.ConditionsAwareDecisionConditionsMap(nil, nil, []authorizer.Condition{authorizer.GenericCondition{
		ID: want.ID, Type: want.Type, Condition: m.AllowConditions[0].Condition, Description: m.AllowConditions[0].Description}})
	for i, c := range admissionCases {
		wantDecision, wantReason, wantErr := kc.EvaluateConditions(ctx, local, c.data)
		if wantDecision != c.want {
			t.Errorf("%s: in process %v, %q, %v; want %v", c.name, wantDecision, wantReason, wantErr, c.want)
		}
		if d, reason, _ := kc.EvaluateConditions(ctx, received, c.data); d != wantDecision || reason != wantReason {
			t.Errorf("%s: conditions received over HTTPS, in process: %v, %q; want %v, %q", c.name, d, reason, wantDecision, wantReason)
		}

		uid := types.UID("req-" + string(rune('a'+i)))
		var answer conditionsReview
		post(t, srv, "/v1/conditions", conditionsReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1alpha1", Kind: "AuthorizationConditionsReview"},
			Request:  &conditionsRequest{Decision: dec, AdmissionRequest: admissionRequest(t, uid, c.data)},
		}, &answer)
		r := answer.Response
		if r == nil || r.Decision == nil {
			t.Fatalf("%s: callback answer %+v", c.name, answer)
		}
		if r.UID != uid {
			t.Errorf("%s: callback uid %q, want %q", c.name, r.UID, uid)
		}
		d := wireDecisionOf(t, r.Decision)
		if d != wantDecision {
			t.Errorf("%s: callback decision %s; in process %v", c.name, r.Decision.Type, wantDecision)
		}
		// A condition's evaluation error is part of the decision: in its
		// reason, in process and over the wire, never an authorizer error
		// or an evaluationError (k8s.io/apiserver turns either into a 500).
		details := detailsOf(r.Decision)
		if want := apiServerReason(wantDecision, wantReason); details == nil || details.Reason != want || details.EvaluationError != "" {
			t.Errorf("%s: callback details %+v; in process reason %q", c.name, details, want)
		}
		if wantErr != nil {
			t.Errorf("%s: in process, error %v", c.name, wantErr)
		}
	}
}

// detailsOf is the details of a concrete decision.
func detailsOf(d *wireDecision) *wireDetails {
	switch d.Type {
	case "Allow":
		return d.Allow
	case "Deny":
		return d.Deny
	}
	return d.NoOpinion
}

// wireDecisionOf is the concrete decision d says.
func wireDecisionOf(t *testing.T, d *wireDecision) authorizer.Decision {
	t.Helper()
	switch d.Type {
	case "Allow":
		return authorizer.DecisionAllow
	case "Deny":
		return authorizer.DecisionDeny
	case "NoOpinion":
		return authorizer.DecisionNoOpinion
	}
	t.Errorf("callback decision of type %q, want a concrete one", d.Type)
	return authorizer.DecisionDeny
}

// admissionRequest is data as kube-apiserver puts it in the callback.
func admissionRequest(t *testing.T, uid types.UID, data podCreate) *admissionv1.AdmissionRequest {
	t.Helper()
	raw := func(o runtime.Object) runtime.RawExtension {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	gvk, gvr := data.GetKind(), data.GetResource()
	kind := metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
	res := metav1.GroupVersionResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource}
	u := data.GetUserInfo()
	dryRun := data.IsDryRun()
	return &admissionv1.AdmissionRequest{
		UID: uid, Kind: kind, Resource: res, RequestKind: &kind, RequestResource: &res,
		SubResource: data.GetSubresource(), Name: data.GetName(), Namespace: data.GetNamespace(),
		Operation: admissionv1.Operation(data.GetOperation()),
		UserInfo:  authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()},
		Object:    raw(data.GetObject()), Options: raw(data.GetOperationOptions()), DryRun: &dryRun,
	}
}
