package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/kcedar/kcedar/internal/wire"
)

// fuzzPolicies allow one group everything and nothing else.
const fuzzPolicies = `@id("admins") permit(principal in k8s::Group::"fuzz-admins", action, resource);
@id("no-secrets") forbid(principal, action, resource is core::secrets);`

func postRaw(h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	return rec
}

// FuzzAuthorize: the SubjectAccessReview decoder never panics (a 500 would
// show one: ServeHTTP recovers) and answers Allow only to a review that
// decodes and names the one group the policies allow.
func FuzzAuthorize(f *testing.F) {
	s, _ := newTestServer(f, fuzzPolicies)
	for _, seed := range []string{
		sarJSON("a", []string{"fuzz-admins"}, "get", "", "pods", "ns", "p"),
		sarJSON("a", []string{"fuzz-admins"}, "get", "", "secrets", "ns", "s"),
		sarJSON("b", nil, "list", "apps", "deployments", "", ""),
		`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"a","groups":["fuzz-admins"],"nonResourceAttributes":{"path":"/x","verb":"get"}}}`,
		`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{}}`,
		`{"kind":"SubjectAccessReview"}`, `[]`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := postRaw(s, "/v1/authorize", body)
		if rec.Code >= 500 {
			t.Fatalf("%d: %s", rec.Code, rec.Body)
		}
		if rec.Code != http.StatusOK {
			return
		}
		var resp authorizationv1.SubjectAccessReview
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("response is not JSON: %v", err)
		}
		if resp.Status.Allowed && resp.Status.Denied {
			t.Fatal("allowed and denied")
		}
		if !resp.Status.Allowed {
			return
		}
		var in authorizationv1.SubjectAccessReview
		if err := json.Unmarshal(body, &in); err != nil || !slices.Contains(in.Spec.Groups, "fuzz-admins") {
			t.Fatalf("Allow for a review that does not name the allowed group (%v): %q", err, body)
		}
		if ra := in.Spec.ResourceAttributes; ra != nil && ra.Group == "" && ra.Resource == "secrets" {
			t.Fatalf("Allow despite the forbid: %q", body)
		}
	})
}

// FuzzConditions: the AuthorizationConditionsReview decoder never panics and
// never answers Allow unless the decision sent back is itself an
// unconditional Allow (or a union holding one): garbage cannot forge signed
// conditions.
func FuzzConditions(f *testing.F) {
	s, _ := newTestServer(f, fuzzPolicies)
	for _, seed := range []string{
		`{"apiVersion":"authorization.k8s.io/v1alpha1","kind":"AuthorizationConditionsReview","request":{"decision":{"conditions":[{"id":"kcedar.dev/x","type":"kcedar.dev/cedar-v1","condition":"e30","effect":"Allow"}]},"admissionRequest":{"uid":"u","operation":"CREATE","namespace":"ns","name":"p","object":{"kind":"Pod"}}}}`,
		`{"apiVersion":"authorization.k8s.io/v1alpha1","kind":"AuthorizationConditionsReview","request":{"decision":{"type":"ConditionsMap","conditionsMap":{"allowConditions":[{"id":"kcedar.dev/x","type":"kcedar.dev/cedar-residual-v4","condition":"kc4;k1;abc;core::pods;true"}]}},"admissionRequest":{"uid":"u","operation":"CREATE"}}}`,
		`{"apiVersion":"authorization.k8s.io/v1alpha1","kind":"AuthorizationConditionsReview","request":{"decision":{"type":"Union","union":[{"authorizerName":"a","decision":{"type":"Allow","allow":{}}}]},"admissionRequest":{"uid":"u"}}}`,
		`{"apiVersion":"authorization.k8s.io/v1alpha1","kind":"AuthorizationConditionsReview","request":{}}`,
		`{"apiVersion":"authorization.k8s.io/v1alpha1","kind":"AuthorizationConditionsReview"}`,
		`{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := postRaw(s, "/v1/conditions", body)
		if rec.Code >= 500 {
			t.Fatalf("%d: %s", rec.Code, rec.Body)
		}
		if rec.Code != http.StatusOK {
			return
		}
		var resp wire.AuthorizationConditionsReview
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || resp.Response == nil {
			t.Fatalf("response: %v: %s", err, rec.Body)
		}
		if err := wire.Validate(&resp.Response.Decision); err != nil {
			t.Fatalf("an answer upstream would reject (%v): %s", err, rec.Body)
		}
		if resp.Response.Decision.Type != wire.DecisionTypeAllow {
			return
		}
		var in conditionsReviewRequest
		if err := json.Unmarshal(body, &in); err != nil || in.Request == nil || !holdsAllow(in.Request.Decision) {
			t.Fatalf("Allow from conditions kcedar did not sign (%v): %q", err, body)
		}
	})
}

// holdsAllow reports whether d is an unconditional Allow, or a union with one.
func holdsAllow(d *wire.ConditionsAwareDecision) bool {
	if d == nil {
		return false
	}
	if d.Type == wire.DecisionTypeAllow {
		return true
	}
	return d.Type == wire.DecisionTypeUnion && slices.ContainsFunc(d.Union, func(m wire.UnionMember) bool { return holdsAllow(&m.Decision) })
}
