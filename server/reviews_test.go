package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/accessreview"
)

const reviewPolicies = `
@id("dev-read") permit(principal in k8s::Group::"dev", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods)
when { resource.namespace == "team-a" };
@id("alice") permit(principal == k8s::User::"alice", action, resource is core::pods);
@id("no-contractors") forbid(principal in k8s::Group::"contractors", action, resource is core::pods);
`

func postJSON(t *testing.T, h http.Handler, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	return rec
}

func TestResourceAccessReviewEndpoint(t *testing.T) {
	s, _ := newTestServer(t, reviewPolicies)
	rec := postJSON(t, s, "/v1/resourceaccessreview", `{"kind":"LocalResourceAccessReview","apiVersion":"authorization.kubernetes.io/v1","namespace":"team-a","authorizationAttributes":{"verb":"get","resource":"pods"}}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var resp accessreview.ResourceAccessReviewResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Kind != "LocalResourceAccessReviewResponse" || resp.Namespace != "team-a" || !slices.Equal(resp.Users, []string{"alice"}) || !slices.Equal(resp.Groups, []string{"dev"}) {
		t.Errorf("response %s", rec.Body)
	}
	if len(resp.Denied) != 1 || resp.Denied[0].Name != "contractors" || !slices.Equal(resp.Denied[0].Policies, []string{"no-contractors"}) {
		t.Errorf("denied: %+v", resp.Denied)
	}
	// Another namespace: dev's rule does not apply.
	rec = postJSON(t, s, "/v1/resourceaccessreview", `{"kind":"ResourceAccessReview","apiVersion":"authorization.kubernetes.io/v1","authorizationAttributes":{"verb":"get","resource":"pods","namespace":"team-b"}}`)
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || slices.Contains(resp.Groups, "dev") {
		t.Errorf("team-b: %s (%v)", rec.Body, err)
	}
	for _, bad := range []string{
		`{"kind":"SubjectAccessReview","apiVersion":"authorization.kubernetes.io/v1","authorizationAttributes":{"verb":"get","resource":"pods"}}`,
		`{"kind":"ResourceAccessReview","apiVersion":"authorization.kubernetes.io/v1","authorizationAttributes":{"resource":"pods"}}`,
		`{"kind":"LocalResourceAccessReview","apiVersion":"authorization.kubernetes.io/v1","authorizationAttributes":{"verb":"get","resource":"pods"}}`,
		`{"kind":"ResourceAccessReview","apiVersion":"authorization.kubernetes.io/v1","namespace":"a","authorizationAttributes":{"verb":"get","resource":"pods","namespace":"b"}}`,
		`not json`,
	} {
		if rec := postJSON(t, s, "/v1/resourceaccessreview", bad); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", bad, rec.Code)
		}
	}
}

func TestRulesReviewEndpoint(t *testing.T) {
	s, _ := newTestServer(t, reviewPolicies)
	rec := postJSON(t, s, "/v1/rulesreview", `{"kind":"SubjectRulesReview","apiVersion":"authorization.kubernetes.io/v1","spec":{"user":"bob","groups":["dev"],"namespace":"team-a"}}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var resp accessreview.SubjectRulesReview
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || resp.Status == nil {
		t.Fatalf("%s (%v)", rec.Body, err)
	}
	if len(resp.Status.ResourceRules) != 1 || !slices.Equal(resp.Status.ResourceRules[0].Verbs, []string{"get", "list"}) || resp.Status.Incomplete {
		t.Errorf("rules: %s", rec.Body)
	}
	if rec := postJSON(t, s, "/v1/rulesreview", `{"kind":"SubjectRulesReview","apiVersion":"authorization.kubernetes.io/v1","spec":{}}`); rec.Code != http.StatusBadRequest {
		t.Errorf("empty subject: status %d", rec.Code)
	}
}
