package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/wire"
	"github.com/kcedar/kcedar/schemagen"
)

const unionPolicies = `
@id("dev-reads") permit (principal in k8s::Group::"dev", action == k8s::Action::"list", resource is core::pods) when { resource.namespace == "dev" };
@id("no-secrets") forbid (principal in k8s::Group::"contractors", action, resource is core::secrets);
@id("bob-on-n1") permit (principal == k8s::User::"bob", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };
`

// unionServer serves k8s.io/apiserver's union of kcedar and an authorizer
// that allows group system:masters: an authorizer that is not kcedar's.
func unionServer(t *testing.T) (*Server, *prometheus.Registry) {
	t.Helper()
	s, err := schemagen.Default()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := cedar.New(cedar.StaticPolicies(cedar.PolicyFile{Name: "p.cedar", Text: []byte(unionPolicies)}), s, cedar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	masters := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		for _, g := range a.GetUser().GetGroups() {
			if g == "system:masters" {
				return authorizer.DecisionAllow, "masters", nil
			}
		}
		return authorizer.DecisionNoOpinion, "", nil
	})
	u, err := union.New(union.NamedAuthorizer{AuthorizerName: "kcedar", Authorizer: kc}, union.NamedAuthorizer{AuthorizerName: "masters", Authorizer: masters})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := New(u, Options{Logger: quietLogger(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return srv, reg
}

func sarBody(user string, groups []string, verb, resource, ns string, handles bool) string {
	spec := map[string]any{"user": user, "groups": groups, "resourceAttributes": map[string]any{"verb": verb, "resource": resource, "version": "v1", "namespace": ns}}
	if handles {
		spec["authorizationOptions"] = map[string]any{"handledDecisionTypes": []string{"Allow", "Deny", "NoOpinion", "ConditionsMap", "Union"}}
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
	return string(b)
}

func sarStatus(t *testing.T, s http.Handler, body string) wire.SubjectAccessReviewStatus {
	t.Helper()
	rec := postJSON(t, s, "/v1/authorize", body)
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	var resp sarResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	return resp.Status
}

// Another authorizer is served through k8s.io/apiserver's interface: the
// union's Allow, Deny and NoOpinion, its conditions to a caller that takes
// them (its unconditional decision for one that does not), and the
// callback evaluating them through the union's EvaluateConditions; the
// endpoints no Options piece was given for are absent.
func TestServeAnotherAuthorizer(t *testing.T) {
	s, _ := unionServer(t)
	cases := []struct {
		name            string
		body            string
		allowed, denied bool
		reasonHas       string
	}{
		{"kcedar allows", sarBody("jane", []string{"dev"}, "list", "pods", "dev", false), true, false, "dev-reads"},
		{"kcedar denies before masters", sarBody("carl", []string{"contractors", "system:masters"}, "get", "secrets", "dev", false), false, true, "no-secrets"},
		{"masters allows", sarBody("root", []string{"system:masters"}, "delete", "nodes", "", false), true, false, "masters"},
		{"nobody decides", sarBody("jane", []string{"dev"}, "list", "pods", "prod", false), false, false, "no policy applies"},
		{"conditions folded for a caller that cannot take them", sarBody("bob", nil, "create", "pods", "team", false), false, false, "no policy applies"},
	}
	for _, tc := range cases {
		st := sarStatus(t, s, tc.body)
		if st.Allowed != tc.allowed || st.Denied != tc.denied || !strings.Contains(st.Reason, tc.reasonHas) || st.ConditionalDecision != nil {
			t.Errorf("%s: %+v", tc.name, st)
		}
	}
	st := sarStatus(t, s, sarBody("bob", nil, "create", "pods", "team", true))
	if st.ConditionalDecision == nil || st.ConditionalDecision.Type != wire.DecisionTypeUnion {
		t.Fatalf("a caller that takes conditions: %+v, want the union's conditional decision", st)
	}
	for node, allowed := range map[string]bool{"n1": true, "n2": false} {
		review := map[string]any{"apiVersion": wire.ConditionsReviewVersion, "kind": wire.ConditionsReviewKind, "request": map[string]any{
			"decision": st.ConditionalDecision,
			"admissionRequest": map[string]any{"uid": "u1", "operation": "CREATE", "namespace": "team", "name": "web",
				"kind": map[string]any{"group": "", "version": "v1", "kind": "Pod"}, "resource": map[string]any{"group": "", "version": "v1", "resource": "pods"},
				"requestKind": map[string]any{"group": "", "version": "v1", "kind": "Pod"}, "requestResource": map[string]any{"group": "", "version": "v1", "resource": "pods"},
				"userInfo": map[string]any{"username": "bob"},
				"object":   map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "web", "namespace": "team"}, "spec": map[string]any{"nodeName": node}}},
		}}
		b, _ := json.Marshal(review)
		rec := postJSON(t, s, "/v1/conditions", string(b))
		var resp wire.AuthorizationConditionsReview
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || resp.Response == nil {
			t.Fatalf("%s: %d %s", node, rec.Code, rec.Body)
		}
		if (resp.Response.Decision.Type == wire.DecisionTypeAllow) != allowed || resp.Response.UID != "u1" {
			t.Errorf("pod on %s: %+v, want allowed %v", node, resp.Response, allowed)
		}
	}
	for _, path := range []string{"/v1/admit", "/v1/rulesreview", "/v1/resourceaccessreview"} {
		if rec := postJSON(t, s, path, `{}`); rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d, want no such endpoint without its Options piece", path, rec.Code)
		}
	}
}
