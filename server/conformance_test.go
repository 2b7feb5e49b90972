package server

// KEP-5681 conformance: this file plays a kube-apiserver with conditional
// authorization, exactly as docs (and /work/shared/notes/kep-5681-wire.md)
// describe the wire, against kcedar's handler. Its inputs are AdmissionRequests
// a real kube-apiserver sent (test/e2e/conditions_test.go records them into
// testdata/admission with KCEDAR_UPDATE_TESTDATA=1) and the policies that
// test ran (testdata/admission/policies.cedar).

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/entities"
	gen "github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/store"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/oracle"
	"github.com/kcedar/kcedar/internal/upstream"
	"github.com/kcedar/kcedar/internal/wire"
	"github.com/kcedar/kcedar/residual"
)

const kepTestdata = "testdata/admission"

// kepServer is a KEP-native kcedar (no admission enforcement) over the shared
// policies, validated against the schema, signing with keys, and what the
// one-phase oracle decides with: the schema and the policies.
type kepServer struct {
	*served
	schema   *gen.Schema
	policies *cedarlang.PolicySet
}

func newKepServer(t testing.TB, keys *residual.Keyring) *kepServer {
	t.Helper()
	schema := embeddedschema.Schema(t)
	paths := []string{filepath.Join(kepTestdata, "policies.cedar")}
	s := serve(t, serveConfig{schema: schema, paths: paths, keys: keys})
	if err := s.source.Ready(); err != nil {
		t.Fatalf("the shared policies do not load: %v", err)
	}
	validator, err := cedarlang.NewSchemaValidator(schema)
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewStore(paths, validator, quietLogger())
	if err := st.Load(); err != nil {
		t.Fatal(err)
	}
	return &kepServer{served: s, schema: schema, policies: st.Current()}
}

func kepKey(id string, b byte) residual.Key {
	return residual.Key{ID: id, Secret: bytes.Repeat([]byte{b}, conditions.MinKeyBytes)}
}

func kepKeyring(t testing.TB, keys ...residual.Key) *residual.Keyring {
	t.Helper()
	kr, err := residual.NewKeyring(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// kepCase is one captured admission request and what became of it.
type kepCase struct {
	File        string
	Description string          `json:"description"`
	User        string          `json:"user"`
	Verb        string          `json:"verb"`
	Outcome     string          `json:"outcome"`
	Decision    string          `json:"decision"`
	Message     string          `json:"message"`
	Raw         json.RawMessage `json:"request"`
	Request     admissionv1.AdmissionRequest
}

// kepRequired are the captures the tests below rely on by name.
var kepRequired = []string{
	"create-pod-n1", "create-pod-n2", "create-pod-control", "create-pod-bob-n2",
	"update-cm-owner-kept", "update-cm-owner-changed", "patch-cm-owner-kept", "patch-cm-owner-changed",
	"delete-cm-unprotected", "delete-cm-protected", "delete-cm-bob-protected",
	"connect-exec-ls", "connect-exec-sh",
}

func kepCases(t testing.TB) map[string]*kepCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(kepTestdata, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]*kepCase{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := &kepCase{File: strings.TrimSuffix(filepath.Base(f), ".json")}
		if err := json.Unmarshal(b, c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := json.Unmarshal(c.Raw, &c.Request); err != nil {
			t.Fatalf("%s: request: %v", f, err)
		}
		if c.Request.UID == "" || c.Request.UserInfo.Username != c.User {
			t.Fatalf("%s: request without uid, or not of user %s", f, c.User)
		}
		switch {
		case c.Outcome == "accepted" && c.Decision == "Allow":
		case c.Outcome == "rejected" && (c.Decision == "Deny" || c.Decision == "NoOpinion"):
		default:
			t.Fatalf("%s: outcome %q with expected decision %q", f, c.Outcome, c.Decision)
		}
		cases[c.File] = c
	}
	for _, name := range kepRequired {
		if cases[name] == nil {
			t.Fatalf("%s/%s.json is missing: run `KCEDAR_UPDATE_TESTDATA=1 make e2e E2E_FLAGS='-run TestConditional'`", kepTestdata, name)
		}
	}
	return cases
}

func kepSortedCases(t testing.TB) []*kepCase {
	m := kepCases(t)
	out := make([]*kepCase, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *kepCase) int { return strings.Compare(a.File, b.File) })
	return out
}

// kepVerbs are the verbs the API server authorized an admission operation
// as: an UPDATE is an update or a patch (a patch is admitted with
// UpdateOptions, so the options cannot tell); a connect is create (POST) or
// get (websocket GET).
func kepVerbs(a *admissionv1.AdmissionRequest) []string {
	switch a.Operation {
	case admissionv1.Create:
		return []string{"create"}
	case admissionv1.Update:
		return []string{"update", "patch"}
	case admissionv1.Delete:
		return []string{"delete"}
	case admissionv1.Connect:
		return []string{"create", "get"}
	}
	return nil
}

// kepSAR is the SubjectAccessReview the API server sends for the request
// before admission, with the KEP's options.
func kepSAR(a *admissionv1.AdmissionRequest, verb string, opts *wire.AuthorizationOptions) []byte {
	name := a.Name
	if verb == "create" && a.Operation == admissionv1.Create {
		name = "" // a create's name is in the body, not in the request's path
	}
	var extra map[string]authorizationv1.ExtraValue
	for k, v := range a.UserInfo.Extra {
		if extra == nil {
			extra = map[string]authorizationv1.ExtraValue{}
		}
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := wire.SubjectAccessReview{}
	sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
	sar.Spec.SubjectAccessReviewSpec = authorizationv1.SubjectAccessReviewSpec{
		User: a.UserInfo.Username, UID: a.UserInfo.UID, Groups: a.UserInfo.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.Namespace, Verb: verb, Group: a.Resource.Group, Version: a.Resource.Version,
			Resource: a.Resource.Resource, Subresource: a.SubResource, Name: name,
		},
	}
	sar.Spec.AuthorizationOptions = opts
	b, _ := json.Marshal(sar)
	return b
}

var kepAllTypes = &wire.AuthorizationOptions{HandledDecisionTypes: []wire.DecisionType{
	wire.DecisionTypeAllow, wire.DecisionTypeDeny, wire.DecisionTypeNoOpinion, wire.DecisionTypeConditionsMap, wire.DecisionTypeUnion,
}}

func kepPost(h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	return rec
}

// kepStatus is a SubjectAccessReview status with the conditional decision
// kept exactly as kcedar wrote it.
type kepStatus struct {
	Allowed             bool            `json:"allowed"`
	Denied              bool            `json:"denied"`
	Reason              string          `json:"reason"`
	EvaluationError     string          `json:"evaluationError"`
	ConditionalDecision json.RawMessage `json:"conditionalDecision"`
}

func kepAuthorize(t testing.TB, h http.Handler, sar []byte) kepStatus {
	t.Helper()
	rec := kepPost(h, "/v1/authorize", sar)
	if rec.Code != http.StatusOK {
		t.Fatalf("/v1/authorize: %d %s", rec.Code, rec.Body)
	}
	var resp struct {
		APIVersion string    `json:"apiVersion"`
		Kind       string    `json:"kind"`
		Status     kepStatus `json:"status"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatalf("/v1/authorize answer: %v: %s", err, rec.Body)
	}
	if resp.APIVersion != "authorization.k8s.io/v1" || resp.Kind != "SubjectAccessReview" {
		t.Fatalf("/v1/authorize answered %s %s", resp.APIVersion, resp.Kind)
	}
	return resp.Status
}

// kepConcrete is the decision of an unconditional answer.
func kepConcrete(st kepStatus) string {
	switch {
	case st.Allowed && st.Denied:
		return "Allow and Deny"
	case st.Allowed:
		return "Allow"
	case st.Denied:
		return "Deny"
	}
	return "NoOpinion"
}

// kepReview POSTs an AuthorizationConditionsReview with the given request
// member and returns the HTTP status and the decoded response member.
func kepReview(t testing.TB, h http.Handler, request any) (int, *wire.AuthorizationConditionsResponse, string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"apiVersion": wire.ConditionsReviewVersion, "kind": wire.ConditionsReviewKind, "request": request})
	if err != nil {
		t.Fatal(err)
	}
	return kepReviewBody(t, h, body)
}

func kepReviewBody(t testing.TB, h http.Handler, body []byte) (int, *wire.AuthorizationConditionsResponse, string) {
	t.Helper()
	rec := kepPost(h, "/v1/conditions", body)
	if rec.Code != http.StatusOK {
		return rec.Code, nil, rec.Body.String()
	}
	var review wire.AuthorizationConditionsReview
	if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil {
		t.Fatalf("/v1/conditions answer: %v: %s", err, rec.Body)
	}
	if review.APIVersion != wire.ConditionsReviewVersion || review.Kind != wire.ConditionsReviewKind || review.Response == nil || review.Request != nil {
		t.Fatalf("/v1/conditions answered %s", rec.Body)
	}
	return rec.Code, review.Response, rec.Body.String()
}

// kepUpstreamReview is the upstream callback: the decision exactly as
// returned, with the AdmissionRequest exactly as captured. It checks the
// envelope and returns the decision's type and details.
func kepUpstreamReview(t testing.TB, h http.Handler, decision json.RawMessage, c *kepCase) (wire.DecisionType, *wire.DecisionDetails) {
	t.Helper()
	code, resp, body := kepReview(t, h, map[string]any{"decision": decision, "admissionRequest": c.Raw})
	if code != http.StatusOK {
		t.Fatalf("%s: /v1/conditions: %d %s", c.File, code, body)
	}
	if resp.UID != c.Request.UID {
		t.Fatalf("%s: response.uid %q, want the admission request's %q", c.File, resp.UID, c.Request.UID)
	}
	d := &resp.Decision
	var details *wire.DecisionDetails
	switch d.Type {
	case wire.DecisionTypeAllow:
		details = d.Allow
	case wire.DecisionTypeDeny:
		details = d.Deny
	case wire.DecisionTypeNoOpinion:
		details = d.NoOpinion
	default:
		t.Fatalf("%s: the callback answered a decision of type %q, want a concrete one: %s", c.File, d.Type, body)
	}
	if details == nil || d.ConditionsMap != nil || d.Union != nil {
		t.Fatalf("%s: malformed concrete decision: %s", c.File, body)
	}
	return d.Type, details
}

// kepOnePhase is the answer of Cedar with everything known: the captured
// request's user, verb, resource, name, namespace and objects.
func kepOnePhase(t testing.TB, s *kepServer, a *admissionv1.AdmissionRequest, verb string) string {
	t.Helper()
	data := upstream.AdmissionRequestData(a)
	req := &entities.Request{User: *data.User, Verb: verb, ResourceRequest: true, APIGroup: data.APIGroup, APIVersion: data.APIVersion,
		Resource: data.Resource, Subresource: data.Subresource, Namespace: data.Namespace, Name: data.Name}
	target := entities.ResolveTarget(s.schema, req)
	if target.Resource == nil {
		t.Fatalf("%s is not a typed resource", req)
	}
	ev := &conditions.Evaluator{Schema: s.schema, Codec: conditions.NewCodec(conditions.RandomKeyring())}
	env, err := ev.Env(target.EntityType, data)
	if err != nil {
		t.Fatalf("one-phase environment: %v", err)
	}
	ents := env.Entities.(*entities.Entities)
	ents.Principal = entities.PrincipalEntity(*data.User)
	in := &oracle.Policies{}
	for _, p := range s.policies.Policies {
		in.Add(p.ID, p.Compiled())
	}
	return oracle.Evaluate(in, ents, ents.Principal.UID, gen.ActionUID(verb), ents.Resource.UID).Decision
}

// kepWantConditions are the conditions kcedar must return for the conditional
// captures: deny condition ids, then allow condition ids.
var kepWantConditions = map[string][2][]string{
	"create-pod-n1":           {{"alice-not-on-control"}, {"alice-pods-on-n1"}},
	"create-pod-n2":           {{"alice-not-on-control"}, {"alice-pods-on-n1"}},
	"create-pod-control":      {{"alice-not-on-control"}, {"alice-pods-on-n1"}},
	"update-cm-owner-kept":    {nil, {"alice-configmaps-keep-owner"}},
	"update-cm-owner-changed": {nil, {"alice-configmaps-keep-owner"}},
	"update-cm-owner-removed": {nil, {"alice-configmaps-keep-owner"}},
	"patch-cm-owner-kept":     {nil, {"alice-configmaps-keep-owner"}},
	"patch-cm-owner-changed":  {nil, {"alice-configmaps-keep-owner"}},
	"delete-cm-unprotected":   {nil, {"alice-deletes-unprotected"}},
	"delete-cm-protected":     {nil, {"alice-deletes-unprotected"}},
	"connect-exec-ls":         {nil, {"alice-exec-ls"}},
	"connect-exec-sh":         {nil, {"alice-exec-ls"}},
}

// kepCheckMap checks a ConditionsMap against the API's rules and kcedar's
// promises: 1..128 conditions, unique label-key ids outside the reserved
// prefixes, kcedar's type, conditions under 1,024 bytes (these captures'
// conditions are small; upstream takes up to 10,240), descriptions under
// 1,024 bytes that name the policy's @reason.
func kepCheckMap(t testing.TB, s *kepServer, c *kepCase, m *wire.ConditionsMap) {
	t.Helper()
	all := slices.Concat(m.DenyConditions, m.NoOpinionConditions, m.AllowConditions)
	if len(m.DenyConditions)+len(m.AllowConditions) == 0 || len(all) > wire.MaxConditions {
		t.Fatalf("%s: %d deny, %d noOpinion, %d allow conditions", c.File, len(m.DenyConditions), len(m.NoOpinionConditions), len(m.AllowConditions))
	}
	if err := wire.Validate(&wire.ConditionsAwareDecision{Type: wire.DecisionTypeConditionsMap, ConditionsMap: m}); err != nil {
		t.Errorf("%s: upstream would reject the decision: %v", c.File, err)
	}
	byCondition := map[string]*cedarlang.Policy{}
	for _, p := range s.policies.Policies {
		byCondition[conditions.ConditionID(p.ID)] = p
	}
	for _, cond := range all {
		if cond.Type != conditions.ConditionType {
			t.Errorf("%s: condition type %q", c.File, cond.Type)
		}
		if len(cond.Condition) > conditions.MaxConditionBytes || len(cond.Condition) > 1024 {
			t.Errorf("%s: condition %s: %d bytes", c.File, cond.ID, len(cond.Condition))
		}
		if p, ok := byCondition[cond.ID]; !ok || cond.Description != p.Describe() {
			t.Errorf("%s: condition %s: description %q does not describe a policy of that id", c.File, cond.ID, cond.Description)
		}
	}
	ids := func(cs []wire.Condition) []string {
		var out []string
		for _, c := range cs {
			out = append(out, strings.TrimPrefix(c.ID, conditions.ConditionIDPrefix))
		}
		return out
	}
	if want, ok := kepWantConditions[c.File]; ok {
		if !slices.Equal(ids(m.DenyConditions), want[0]) || !slices.Equal(ids(m.AllowConditions), want[1]) || len(m.NoOpinionConditions) > 0 {
			t.Errorf("%s: conditions deny %v allow %v noOpinion %d, want deny %v allow %v", c.File, ids(m.DenyConditions), ids(m.AllowConditions), len(m.NoOpinionConditions), want[0], want[1])
		}
	}
}

// TestConformanceUpstream replays every captured request through the
// upstream flow: SubjectAccessReview with handledDecisionTypes, then, for a
// conditional answer, AuthorizationConditionsReview with the decision as
// returned and the AdmissionRequest as captured. The final decision must be
// the one the real cluster enforced and the one Cedar gives with everything
// known; a caller that does not handle conditions gets them folded.
func TestConformanceUpstream(t *testing.T) {
	s := newKepServer(t, kepKeyring(t, kepKey("k1", 1)))
	conditional := 0
	for _, c := range kepSortedCases(t) {
		for _, verb := range kepVerbs(&c.Request) {
			t.Run(c.File+"/"+verb, func(t *testing.T) {
				one := kepOnePhase(t, s, &c.Request, verb)
				if one != c.Decision {
					t.Fatalf("one-phase Cedar decides %s, the e2e run expects %s (%s)", one, c.Decision, c.Outcome)
				}
				st := kepAuthorize(t, s, kepSAR(&c.Request, verb, kepAllTypes))
				var got string
				var m *wire.ConditionsMap
				if st.ConditionalDecision == nil {
					got = kepConcrete(st)
					if _, ok := kepWantConditions[c.File]; ok {
						t.Errorf("want a conditional answer, got %s (%s)", got, st.Reason)
					}
				} else {
					conditional++
					if st.Allowed || st.Denied {
						t.Fatalf("conditional answer with allowed=%v denied=%v", st.Allowed, st.Denied)
					}
					var d wire.ConditionsAwareDecision
					if err := json.Unmarshal(st.ConditionalDecision, &d); err != nil {
						t.Fatal(err)
					}
					if d.Type != wire.DecisionTypeConditionsMap || d.ConditionsMap == nil || d.Allow != nil || d.Deny != nil || d.NoOpinion != nil || d.Union != nil {
						t.Fatalf("conditionalDecision: %s", st.ConditionalDecision)
					}
					m = d.ConditionsMap
					kepCheckMap(t, s, c, m)
					typ, details := kepUpstreamReview(t, s, st.ConditionalDecision, c)
					got = string(typ)
					if details.EvaluationError != "" {
						t.Errorf("evaluation error on a genuine condition: %s", details.EvaluationError)
					}
					// The callback explains a refusal as the admission webhook
					// did; a NoOpinion's reason without kcedar's prefix, which
					// the API server adds (the authorizer's name).
					want := c.Message
					if typ == wire.DecisionTypeNoOpinion {
						want = strings.TrimPrefix(want, "kcedar: ")
					}
					if got != "Allow" && c.Message != "" && details.Reason != want {
						t.Errorf("reason %q, the e2e webhook said %q", details.Reason, c.Message)
					}
					// The API server may wrap decisions in a Union: same answer.
					union, _ := json.Marshal(map[string]any{"type": "Union", "union": []any{map[string]any{"authorizerName": authorizerName, "decision": st.ConditionalDecision}}})
					if typ2, _ := kepUpstreamReview(t, s, union, c); typ2 != typ {
						t.Errorf("inside a Union: %s, alone: %s", typ2, typ)
					}
				}
				if got != c.Decision {
					t.Fatalf("two-phase decision %s, want %s (%s in the real cluster)", got, c.Decision, c.Outcome)
				}

				// A caller that does not handle every decision type of
				// conditional authorization (or sends no
				// authorizationOptions) gets no conditions, as upstream
				// requires: Deny if a deny condition exists, else NoOpinion.
				for _, opts := range []*wire.AuthorizationOptions{nil,
					{HandledDecisionTypes: []wire.DecisionType{wire.DecisionTypeAllow, wire.DecisionTypeDeny, wire.DecisionTypeNoOpinion}},
					{HandledDecisionTypes: []wire.DecisionType{wire.DecisionTypeAllow, wire.DecisionTypeDeny, wire.DecisionTypeNoOpinion, wire.DecisionTypeConditionsMap}},
					{HandledDecisionTypes: []wire.DecisionType{wire.DecisionTypeAllow, wire.DecisionTypeNoOpinion, wire.DecisionTypeConditionsMap, wire.DecisionTypeUnion}},
					{HandledDecisionTypes: []wire.DecisionType{wire.DecisionTypeConditionsMap, wire.DecisionTypeUnion}},
				} {
					legacy := kepAuthorize(t, s, kepSAR(&c.Request, verb, opts))
					if legacy.ConditionalDecision != nil {
						t.Fatalf("conditions returned to a caller that does not handle them")
					}
					want := got
					if m != nil {
						want = "NoOpinion"
						if len(m.DenyConditions) > 0 {
							want = "Deny"
						}
					}
					if g := kepConcrete(legacy); g != want {
						t.Errorf("caller without ConditionsMap (%v): %s, want %s", opts, g, want)
					}
				}
			})
		}
	}
	if conditional == 0 {
		t.Fatal("no captured request got a conditional answer")
	}
}

// TestConformanceRefusesTheEarlyProposal: the SubjectAccessReview field
// and the callback of an early KEP-5681 proposal, which no Kubernetes
// release speaks, are refused with a reason that says what to send instead,
// never answered.
func TestConformanceRefusesTheEarlyProposal(t *testing.T) {
	s := newKepServer(t, kepKeyring(t, kepKey("k1", 1)))
	c := kepSortedCases(t)[0]
	var sar map[string]any
	if err := json.Unmarshal(kepSAR(&c.Request, kepVerbs(&c.Request)[0], kepAllTypes), &sar); err != nil {
		t.Fatal(err)
	}
	sar["spec"].(map[string]any)["conditionalAuthorization"] = map[string]any{"mode": "HumanReadable"}
	rec := kepPost(s, "/v1/authorize", kepMarshal(t, sar))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "handledDecisionTypes") {
		t.Errorf("SubjectAccessReview with spec.conditionalAuthorization: %d %s, want 400 naming handledDecisionTypes", rec.Code, rec.Body)
	}
	_, decision := kepConditional(t, s, c)
	for name, req := range map[string]map[string]any{
		"conditionSets":              {"conditionSets": []any{map[string]any{"authorizerName": "kcedar"}}, "operation": "CREATE"},
		"conditionSets and decision": {"conditionSets": []any{}, "decision": decision, "admissionRequest": c.Raw},
	} {
		code, _, body := kepReview(t, s, req)
		if code != http.StatusBadRequest || !strings.Contains(body, "request.decision") {
			t.Errorf("callback with %s: %d %s, want 400 naming request.decision", name, code, body)
		}
	}
}

// kepConditional authorizes capture c (with its first verb) on s and
// returns the ConditionsMap and the decision JSON as kcedar wrote them.
func kepConditional(t testing.TB, s http.Handler, c *kepCase) (*wire.ConditionsAwareDecision, json.RawMessage) {
	t.Helper()
	st := kepAuthorize(t, s, kepSAR(&c.Request, kepVerbs(&c.Request)[0], kepAllTypes))
	if st.ConditionalDecision == nil {
		t.Fatalf("%s: not conditional: %+v", c.File, st)
	}
	var d wire.ConditionsAwareDecision
	if err := json.Unmarshal(st.ConditionalDecision, &d); err != nil || d.ConditionsMap == nil {
		t.Fatalf("%s: %v: %s", c.File, err, st.ConditionalDecision)
	}
	return &d, st.ConditionalDecision
}

func kepMarshal(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// kepRefused checks that a callback with a bad decision is answered, for
// the right request, with Deny or NoOpinion and the error in the reason:
// never in evaluationError, which kube-apiserver 1.38 takes for kcedar
// failing (a 500 instead of the 403 of the decision).
func kepRefused(t testing.TB, s http.Handler, decision json.RawMessage, c *kepCase, want wire.DecisionType, errWant string) {
	t.Helper()
	typ, details := kepUpstreamReview(t, s, decision, c)
	if typ == wire.DecisionTypeAllow {
		t.Fatalf("ALLOWED: %s", decision)
	}
	if want != "" && typ != want {
		t.Errorf("decision %s, want %s (%s; %s)", typ, want, details.Reason, details.EvaluationError)
	}
	if details.EvaluationError != "" || !strings.Contains(details.Reason, "(evaluation error: ") || !strings.Contains(details.Reason, errWant) {
		t.Errorf("reason %q, evaluationError %q; want the error, mentioning %q, in the reason", details.Reason, details.EvaluationError, errWant)
	}
}

// TestConformanceAttacks sends the callback what kcedar never wrote: each
// must be refused (never Allow), with the reason in evaluationError, or be
// a 4xx when the request itself is malformed.
func TestConformanceAttacks(t *testing.T) {
	s := newKepServer(t, kepKeyring(t, kepKey("k1", 1)))
	cases := kepCases(t)
	n1, n2, control := cases["create-pod-n1"], cases["create-pod-n2"], cases["create-pod-control"]
	dN1, rawN1 := kepConditional(t, s, n1)
	dN2, _ := kepConditional(t, s, n2)
	dControl, rawControl := kepConditional(t, s, control)

	// The genuine answers the attacks start from.
	if typ, _ := kepUpstreamReview(t, s, rawN1, n1); typ != wire.DecisionTypeAllow {
		t.Fatalf("genuine create-pod-n1: %s", typ)
	}
	if typ, _ := kepUpstreamReview(t, s, rawControl, control); typ != wire.DecisionTypeDeny {
		t.Fatalf("genuine create-pod-control: %s", typ)
	}
	allowN2 := dN2.ConditionsMap.AllowConditions[0]
	if !strings.Contains(allowN2.Condition, `"n1"`) || !strings.Contains(allowN2.Condition, "==") {
		t.Fatalf("the allow condition of create-pod-n2 is not the expected one: %s", allowN2.Condition)
	}
	// withAllow returns d (a copy) with its allow conditions replaced.
	withAllow := func(d *wire.ConditionsAwareDecision, allow ...wire.Condition) json.RawMessage {
		m := *d.ConditionsMap
		m.AllowConditions = allow
		return kepMarshal(t, wire.ConditionsAwareDecision{Type: wire.DecisionTypeConditionsMap, ConditionsMap: &m})
	}
	edit := func(c wire.Condition, f func(*wire.Condition)) wire.Condition { f(&c); return c }

	t.Run("tampered expression", func(t *testing.T) {
		// On create-pod-n2 the tampered conditions would hold.
		for _, tamper := range [][2]string{{`"n1"`, `"n2"`}, {"==", "!="}} {
			bad := edit(allowN2, func(c *wire.Condition) { c.Condition = strings.Replace(c.Condition, tamper[0], tamper[1], 1) })
			kepRefused(t, s, withAllow(dN2, bad), n2, wire.DecisionTypeNoOpinion, "altered")
		}
		// One byte of the signature.
		bad := edit(allowN2, func(c *wire.Condition) {
			b := []byte(c.Condition)
			i := len("kc4;k1;")
			b[i] ^= 1
			c.Condition = string(b)
		})
		kepRefused(t, s, withAllow(dN2, bad), n2, wire.DecisionTypeNoOpinion, "altered")
		// A tampered deny condition fails closed.
		deny := dControl.ConditionsMap.DenyConditions[0]
		m := *dN1.ConditionsMap
		m.DenyConditions = []wire.Condition{edit(deny, func(c *wire.Condition) { c.Condition = strings.Replace(c.Condition, `"control"`, `"contro1"`, 1) })}
		kepRefused(t, s, kepMarshal(t, wire.ConditionsAwareDecision{Type: wire.DecisionTypeConditionsMap, ConditionsMap: &m}), n1, wire.DecisionTypeDeny, "altered")
	})
	t.Run("truncated condition", func(t *testing.T) {
		allow := dN1.ConditionsMap.AllowConditions[0]
		for _, cut := range []int{1, 10, len(allow.Condition) / 2, len(allow.Condition) - 3} {
			bad := edit(allow, func(c *wire.Condition) { c.Condition = c.Condition[:len(c.Condition)-cut] })
			kepRefused(t, s, withAllow(dN1, bad), n1, wire.DecisionTypeNoOpinion, "condition")
		}
		kepRefused(t, s, withAllow(dN1, edit(allow, func(c *wire.Condition) { c.Condition = "" })), n1, wire.DecisionTypeNoOpinion, "malformed")
	})
	t.Run("foreign key", func(t *testing.T) {
		for name, key := range map[string]residual.Key{"same id, other secret": kepKey("k1", 2), "unknown key id": kepKey("intruder", 1)} {
			other := newKepServer(t, kepKeyring(t, key))
			_, raw := kepConditional(t, other, n1)
			// Its deny condition does not verify either: Deny (fail closed).
			t.Run(name, func(t *testing.T) { kepRefused(t, s, raw, n1, wire.DecisionTypeDeny, "not written by kcedar") })
		}
	})
	t.Run("condition of another type", func(t *testing.T) {
		allow := dN1.ConditionsMap.AllowConditions[0]
		kepRefused(t, s, withAllow(dN1, edit(allow, func(c *wire.Condition) { c.Type = "example.com/cel" })), n1, wire.DecisionTypeNoOpinion, "not kcedar's")
		cel := wire.Condition{ID: "cel-n2", Type: "example.com/cel", Condition: `object.spec.nodeName == "n2"`}
		kepRefused(t, s, withAllow(dN2, cel), n2, wire.DecisionTypeNoOpinion, "not kcedar's")
		// A deny condition kcedar cannot evaluate denies.
		m := *dN1.ConditionsMap
		m.DenyConditions = append(m.DenyConditions, wire.Condition{ID: "cel-deny", Type: "example.com/cel", Condition: "false"})
		kepRefused(t, s, kepMarshal(t, wire.ConditionsAwareDecision{Type: wire.DecisionTypeConditionsMap, ConditionsMap: &m}), n1, wire.DecisionTypeDeny, "not kcedar's")
	})
	t.Run("oversized condition", func(t *testing.T) {
		allow := dN1.ConditionsMap.AllowConditions[0]
		bad := edit(allow, func(c *wire.Condition) { c.Condition += " && true" + strings.Repeat(" ", conditions.MaxConditionBytes) })
		kepRefused(t, s, withAllow(dN1, bad), n1, wire.DecisionTypeNoOpinion, "longer than")
	})
	t.Run("deny condition moved into allowConditions", func(t *testing.T) {
		// On create-pod-control the deny condition holds: as an allow
		// condition it would allow.
		deny := dControl.ConditionsMap.DenyConditions[0]
		moved := kepMarshal(t, wire.ConditionsAwareDecision{Type: wire.DecisionTypeConditionsMap, ConditionsMap: &wire.ConditionsMap{AllowConditions: []wire.Condition{deny}}})
		kepRefused(t, s, moved, control, wire.DecisionTypeNoOpinion, "altered")
		// Next to the genuine deny condition it changes nothing: Deny.
		if typ, _ := kepUpstreamReview(t, s, withAllow(dControl, append(dControl.ConditionsMap.AllowConditions, deny)...), control); typ != wire.DecisionTypeDeny {
			t.Errorf("deny condition also in allowConditions: %s, want Deny", typ)
		}
		// An allow condition moved to noOpinionConditions gives NoOpinion:
		// upstream folds a map of noOpinion conditions only to NoOpinion.
		m := wire.ConditionsMap{NoOpinionConditions: dN1.ConditionsMap.AllowConditions}
		if typ, _ := kepUpstreamReview(t, s, kepMarshal(t, wire.ConditionsAwareDecision{Type: wire.DecisionTypeConditionsMap, ConditionsMap: &m}), n1); typ != wire.DecisionTypeNoOpinion {
			t.Errorf("allow condition moved to noOpinionConditions: %s, want NoOpinion", typ)
		}
		// Copied there, beside itself in allowConditions, it is a decision
		// upstream never builds (one id twice): malformed, Deny.
		m.AllowConditions = dN1.ConditionsMap.AllowConditions
		kepRefused(t, s, kepMarshal(t, wire.ConditionsAwareDecision{Type: wire.DecisionTypeConditionsMap, ConditionsMap: &m}), n1, wire.DecisionTypeDeny, "duplicate condition ID")
	})
	t.Run("condition id changed", func(t *testing.T) {
		allow := dN1.ConditionsMap.AllowConditions[0]
		kepRefused(t, s, withAllow(dN1, edit(allow, func(c *wire.Condition) { c.ID = "bob-everything" })), n1, wire.DecisionTypeNoOpinion, "altered")
		// The description is not signed, but only shown: it changes nothing.
		typ, _ := kepUpstreamReview(t, s, withAllow(dN1, edit(allow, func(c *wire.Condition) { c.Description = "anything" })), n1)
		if typ != wire.DecisionTypeAllow {
			t.Errorf("a changed description changed the decision to %s", typ)
		}
	})
	t.Run("condition replayed for another resource", func(t *testing.T) {
		// Conditions are bound to the resource they were issued for: the
		// deny condition does not verify there: Deny.
		kepRefused(t, s, rawN1, cases["update-cm-owner-kept"], wire.DecisionTypeDeny, "not written by kcedar for this request")
		_, rawUpdate := kepConditional(t, s, cases["update-cm-owner-kept"])
		kepRefused(t, s, rawUpdate, n1, wire.DecisionTypeNoOpinion, "not written by kcedar for this request")
	})
	t.Run("malformed decisions", func(t *testing.T) {
		for name, c := range map[string]struct {
			decision string
			errWant  string
		}{
			"empty conditionsMap":                 {`{"type":"ConditionsMap","conditionsMap":{}}`, "empty conditionsMap"},
			"ConditionsMap without conditionsMap": {`{"type":"ConditionsMap"}`, "without conditionsMap"},
			"unknown decision type":               {`{"type":"Maybe","conditionsMap":` + string(kepMarshal(t, dN1.ConditionsMap)) + `}`, "unknown decision type"},
			"empty decision type":                 {`{}`, "unknown decision type"},
			"too many conditions": {string(kepMarshal(t, wire.ConditionsAwareDecision{Type: wire.DecisionTypeConditionsMap, ConditionsMap: &wire.ConditionsMap{
				AllowConditions: slices.Repeat(dN1.ConditionsMap.AllowConditions, wire.MaxConditions+1)}})), "more than"},
		} {
			t.Run(name, func(t *testing.T) {
				kepRefused(t, s, json.RawMessage(c.decision), n1, wire.DecisionTypeDeny, c.errWant)
			})
		}
	})
	t.Run("deeply nested", func(t *testing.T) {
		// 1e5 parentheses in an (unsigned) condition: refused before parsing.
		nested := "kc4;k1;AAAAAAAAAAAAAAAAAAAAAA;core::pods;" + strings.Repeat("(", 100000) + "true" + strings.Repeat(")", 100000)
		start := time.Now()
		kepRefused(t, s, withAllow(dN1, wire.Condition{ID: "alice-pods-on-n1", Type: conditions.ConditionType, Condition: nested}), n1, wire.DecisionTypeNoOpinion, "longer than")
		// As many as fit: refused by the signature, before parsing.
		fit := "kc4;k1;AAAAAAAAAAAAAAAAAAAAAA;core::pods;" + strings.Repeat("(", 480) + "true" + strings.Repeat(")", 480)
		kepRefused(t, s, withAllow(dN1, wire.Condition{ID: "alice-pods-on-n1", Type: conditions.ConditionType, Condition: fit}), n1, wire.DecisionTypeNoOpinion, "altered")
		// A decision nested in 2,500 Unions around a tampered map.
		bad := withAllow(dN2, edit(allowN2, func(c *wire.Condition) { c.Condition = strings.Replace(c.Condition, `"n1"`, `"n2"`, 1) }))
		var b strings.Builder
		const depth = 2500
		for range depth {
			b.WriteString(`{"type":"Union","union":[{"authorizerName":"kcedar","decision":`)
		}
		b.Write(bad)
		b.WriteString(strings.Repeat(`}]}`, depth))
		kepRefused(t, s, json.RawMessage(b.String()), n2, wire.DecisionTypeNoOpinion, "altered")
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("nested inputs took %v", d)
		}
	})
	t.Run("malformed requests", func(t *testing.T) {
		review := func(apiVersion, kind string, request any) []byte {
			return kepMarshal(t, map[string]any{"apiVersion": apiVersion, "kind": kind, "request": request})
		}
		good := map[string]any{"decision": rawN1, "admissionRequest": n1.Raw}
		goodBody := review(wire.ConditionsReviewVersion, wire.ConditionsReviewKind, good)
		for name, c := range map[string]struct {
			body []byte
			code int
		}{
			"malformed JSON":            {goodBody[:len(goodBody)/2], 400},
			"not an object":             {[]byte(`["AuthorizationConditionsReview"]`), 400},
			"trailing data":             {append(append([]byte{}, goodBody...), `{}`...), 400},
			"trailing brace":            {append(append([]byte{}, goodBody...), `}`...), 400},
			"wrong apiVersion":          {review("authorization.k8s.io/v1", wire.ConditionsReviewKind, good), 400},
			"wrong apiVersion (beta)":   {review("authorization.k8s.io/v1beta1", wire.ConditionsReviewKind, good), 400},
			"wrong kind":                {review(wire.ConditionsReviewVersion, "AdmissionReview", good), 400},
			"SubjectAccessReview":       {review("authorization.k8s.io/v1", "SubjectAccessReview", good), 400},
			"no request":                {review(wire.ConditionsReviewVersion, wire.ConditionsReviewKind, nil), 400},
			"no admissionRequest":       {review(wire.ConditionsReviewVersion, wire.ConditionsReviewKind, map[string]any{"decision": rawN1}), 400},
			"neither decision nor sets": {review(wire.ConditionsReviewVersion, wire.ConditionsReviewKind, map[string]any{"admissionRequest": n1.Raw}), 400},
			"wrong field types":         {review(wire.ConditionsReviewVersion, wire.ConditionsReviewKind, map[string]any{"decision": "Allow", "admissionRequest": n1.Raw}), 400},
			"body over 1 MiB": {review(wire.ConditionsReviewVersion, wire.ConditionsReviewKind, map[string]any{
				"decision": rawN1, "admissionRequest": n1.Raw, "padding": strings.Repeat("x", MaxBodyBytes)}), 413},
			"deeply nested JSON": {[]byte(`{"apiVersion":"` + wire.ConditionsReviewVersion + `","kind":"` + wire.ConditionsReviewKind + `","request":{"decision":` +
				strings.Repeat(`{"type":"Union","union":[{"decision":`, 20000) + `{}` + strings.Repeat(`}]}`, 20000) + `}}`), 400},
		} {
			t.Run(name, func(t *testing.T) {
				code, _, body := kepReviewBody(t, s, c.body)
				if code != c.code {
					t.Fatalf("HTTP %d, want %d: %.300s", code, c.code, body)
				}
				if strings.Contains(body, `"allowed":true`) || strings.Contains(body, `"Allow"`) || strings.TrimSpace(body) == "" {
					t.Fatalf("answer: %.300s", body)
				}
			})
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/conditions", bytes.NewReader(goodBody))
		req.Header.Set("Content-Type", "application/yaml")
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnsupportedMediaType {
			t.Errorf("YAML body: HTTP %d", rec.Code)
		}
	})
}

// TestConformanceBinding replays create-pod-n1's conditions with its
// admission request, one attribute changed: they would hold there, but they
// are bound to the request they were issued for, so they are refused (the
// deny condition fails closed: Deny).
func TestConformanceBinding(t *testing.T) {
	s := newKepServer(t, kepKeyring(t, kepKey("k1", 1)))
	n1 := kepCases(t)["create-pod-n1"]
	_, rawN1 := kepConditional(t, s, n1)
	if typ, _ := kepUpstreamReview(t, s, rawN1, n1); typ != wire.DecisionTypeAllow {
		t.Fatalf("genuine create-pod-n1: %s", typ)
	}
	for name, change := range map[string]func(map[string]any){
		"another user": func(r map[string]any) { r["userInfo"].(map[string]any)["username"] = "mallory" },
		"another group": func(r map[string]any) {
			r["userInfo"].(map[string]any)["groups"] = []string{"system:authenticated", "system:masters"}
		},
		"another namespace": func(r map[string]any) { r["namespace"] = "other" },
		"an UPDATE":         func(r map[string]any) { r["operation"], r["oldObject"] = "UPDATE", r["object"] },
	} {
		t.Run(name, func(t *testing.T) {
			var r map[string]any
			if err := json.Unmarshal(n1.Raw, &r); err != nil {
				t.Fatal(err)
			}
			change(r)
			other := *n1
			other.Raw = kepMarshal(t, r)
			kepRefused(t, s, rawN1, &other, wire.DecisionTypeDeny, "not written by kcedar for this request")
		})
	}
}

// TestConformanceKeyRotation: conditions signed with the old key verify while
// it is kept below the new one, and stop verifying once it is removed; deny
// conditions that no longer verify deny.
func TestConformanceKeyRotation(t *testing.T) {
	cases := kepCases(t)
	n1, control, update := cases["create-pod-n1"], cases["create-pod-control"], cases["update-cm-owner-kept"]
	oldKey, newKey := kepKey("old", 1), kepKey("new", 2)

	before := newKepServer(t, kepKeyring(t, oldKey))
	dOld, rawOld := kepConditional(t, before, n1)
	_, rawOldControl := kepConditional(t, before, control)
	_, rawOldUpdate := kepConditional(t, before, update) // allow conditions only
	if !strings.HasPrefix(dOld.ConditionsMap.AllowConditions[0].Condition, "kc4;old;") {
		t.Fatalf("not signed with the old key: %s", dOld.ConditionsMap.AllowConditions[0].Condition)
	}

	// A replica restarted with the rotated key file: new key first, old kept.
	rotated := newKepServer(t, kepKeyring(t, newKey, oldKey))
	if typ, _ := kepUpstreamReview(t, rotated, rawOld, n1); typ != wire.DecisionTypeAllow {
		t.Fatalf("old-key condition after rotation: %s", typ)
	}
	if typ, _ := kepUpstreamReview(t, rotated, rawOldControl, control); typ != wire.DecisionTypeDeny {
		t.Fatalf("old-key deny condition after rotation: %s", typ)
	}
	if typ, _ := kepUpstreamReview(t, rotated, rawOldUpdate, update); typ != wire.DecisionTypeAllow {
		t.Fatalf("old-key update condition after rotation: %s", typ)
	}
	dNew, rawNew := kepConditional(t, rotated, n1)
	if !strings.HasPrefix(dNew.ConditionsMap.AllowConditions[0].Condition, "kc4;new;") {
		t.Fatalf("not signed with the new key: %s", dNew.ConditionsMap.AllowConditions[0].Condition)
	}
	if typ, _ := kepUpstreamReview(t, before, rawNew, n1); typ == wire.DecisionTypeAllow {
		t.Fatal("a replica that has not rotated yet verified a new-key condition")
	}

	// The old key removed.
	// Then its deny conditions fail closed too: Deny.
	after := newKepServer(t, kepKeyring(t, newKey))
	kepRefused(t, after, rawOld, n1, wire.DecisionTypeDeny, `unknown key "old"`)
	kepRefused(t, after, rawOldControl, control, wire.DecisionTypeDeny, `unknown key "old"`)
	kepRefused(t, after, rawOldUpdate, update, wire.DecisionTypeNoOpinion, `unknown key "old"`)
	if typ, _ := kepUpstreamReview(t, after, rawNew, n1); typ != wire.DecisionTypeAllow {
		t.Fatalf("new-key condition: %s", typ)
	}

	// The same on one live server whose key file is reloaded (Keyring.Replace),
	// after the conditions were evaluated once (and cached).
	kr := kepKeyring(t, newKey, oldKey)
	live := newKepServer(t, kr)
	if typ, _ := kepUpstreamReview(t, live, rawOld, n1); typ != wire.DecisionTypeAllow {
		t.Fatalf("live server, old key kept: %s", typ)
	}
	if err := kr.Rotate(newKey); err != nil {
		t.Fatal(err)
	}
	kepRefused(t, live, rawOld, n1, wire.DecisionTypeDeny, `unknown key "old"`)
	if typ, _ := kepUpstreamReview(t, live, rawNew, n1); typ != wire.DecisionTypeAllow {
		t.Fatalf("live server, new key: %s", typ)
	}

	// A key file that gives the signing key's id a new secret: what is signed
	// from then on verifies (no condition signed with the old secret is
	// served from a cache), and what was signed before does not.
	_, rawUpdateNew := kepConditional(t, live, update)
	if err := kr.Rotate(kepKey("new", 3)); err != nil {
		t.Fatal(err)
	}
	_, rawUpdateResecret := kepConditional(t, live, update)
	if typ, d := kepUpstreamReview(t, live, rawUpdateResecret, update); typ != wire.DecisionTypeAllow {
		t.Fatalf("signed after the secret of key \"new\" changed: %s (%s)", typ, d.EvaluationError)
	}
	kepRefused(t, live, rawUpdateNew, update, wire.DecisionTypeNoOpinion, "altered")
}
