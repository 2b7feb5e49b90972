package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newTestServer(t testing.TB, policies string) (*served, string) {
	t.Helper()
	s, dir := serveText(t, policies, serveConfig{})
	if err := s.source.Ready(); err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func sarJSON(user string, groups []string, verb, group, resource, ns, name string) string {
	sar := authorizationv1.SubjectAccessReview{}
	sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
	sar.Spec = authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: ns, Name: name}}
	b, _ := json.Marshal(sar)
	return string(b)
}

func post(t testing.TB, h http.Handler, path, body string) (*httptest.ResponseRecorder, authorizationv1.SubjectAccessReviewStatus) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	var resp sarResponse
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("response is not JSON: %v: %s", err, rec.Body)
		}
	}
	return rec, resp.Status.SubjectAccessReviewStatus
}

const basePolicies = `
@id("alice-pods") @reason("alice reads pods in team-a")
permit(principal == k8s::User::"alice", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods)
when { resource.namespace == "team-a" };
@id("no-secrets") @reason("secrets are off limits")
forbid(principal, action, resource is core::secrets) when { principal.username == "alice" };
`

func TestAuthorizeEndpoint(t *testing.T) {
	s, _ := newTestServer(t, basePolicies)
	rec, st := post(t, s, "/v1/authorize", sarJSON("alice", nil, "list", "", "pods", "team-a", ""))
	if rec.Code != 200 || !st.Allowed || st.Denied || !strings.Contains(st.Reason, "alice-pods") {
		t.Fatalf("got %d %+v", rec.Code, st)
	}
	_, st = post(t, s, "/v1/authorize", sarJSON("alice", nil, "list", "", "pods", "", ""))
	if st.Allowed || st.Denied {
		t.Fatalf("all namespaces: %+v", st)
	}
	_, st = post(t, s, "/v1/authorize", sarJSON("alice", nil, "get", "", "secrets", "x", "y"))
	if st.Allowed || !st.Denied || !strings.Contains(st.Reason, "no-secrets") || !strings.Contains(st.Reason, "secrets are off limits") {
		t.Fatalf("forbid: %+v", st)
	}
}

func TestBadInputNeverAllows(t *testing.T) {
	s, _ := newTestServer(t, `permit(principal, action, resource);`)
	good := sarJSON("alice", nil, "get", "", "pods", "a", "b")
	cases := map[string]struct {
		body string
		code int
	}{
		"malformed JSON":     {`{"apiVersion": `, 400},
		"not an object":      {`[1,2,3]`, 400},
		"wrong apiVersion":   {strings.Replace(good, "authorization.k8s.io/v1", "authorization.k8s.io/v1beta1", 1), 400},
		"wrong kind":         {strings.Replace(good, "SubjectAccessReview", "TokenReview", 1), 400},
		"no attributes":      {`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"a"}}`, 400},
		"no user":            {`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"resourceAttributes":{"verb":"get","resource":"pods"}}}`, 400},
		"both attributes":    {`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"a","resourceAttributes":{"verb":"get"},"nonResourceAttributes":{"verb":"get","path":"/"}}}`, 400},
		"no verb":            {`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"a","resourceAttributes":{"resource":"pods"}}}`, 400},
		"trailing garbage":   {good + `{}`, 400},
		"trailing brace":     {good + `}`, 400},
		"trailing bracket":   {good + " ]", 400},
		"oversized":          {`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"` + strings.Repeat("a", MaxBodyBytes) + `"}}`, 413},
		"wrong field types":  {`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":5}}`, 400},
		"binary":             {"\x00\x01\x02\xff", 400},
		"deeply nested JSON": {`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":` + strings.Repeat(`{"a":`, 100000) + `1` + strings.Repeat(`}`, 100000) + `}`, 400},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			rec, st := post(t, s, "/v1/authorize", c.body)
			if rec.Code != c.code {
				t.Fatalf("code %d, want %d: %s", rec.Code, c.code, rec.Body)
			}
			if st.Allowed || strings.Contains(rec.Body.String(), `"allowed":true`) {
				t.Fatal("bad input was allowed")
			}
			if strings.TrimSpace(rec.Body.String()) == "" {
				t.Fatal("no error message")
			}
		})
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/authorize", strings.NewReader(good))
	req.Header.Set("Content-Type", "application/yaml")
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnsupportedMediaType {
		t.Fatalf("yaml content type: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/authorize", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", rec.Code)
	}
}

func TestReadyzAndMetrics(t *testing.T) {
	s, dir := serveText(t, `permit(principal, action, resource) garbage`, serveConfig{})
	file := filepath.Join(dir, "p.cedar")
	store := s.source
	if err := store.Load(); err == nil {
		t.Fatal("invalid policies loaded")
	}
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	if rec := get("/readyz"); rec.Code != 503 || !strings.Contains(rec.Body.String(), "p.cedar") {
		t.Fatalf("readyz before a good load: %d %s", rec.Code, rec.Body)
	}
	if rec, _ := post(t, s, "/v1/authorize", sarJSON("a", nil, "get", "", "pods", "x", "y")); rec.Code != 503 {
		t.Fatalf("authorize before a good load: %d", rec.Code)
	}
	os.WriteFile(file, []byte(`@id("all") permit(principal, action, resource);`), 0o644)
	if err := store.Load(); err != nil {
		t.Fatal(err)
	}
	if rec := get("/readyz"); rec.Code != 200 {
		t.Fatalf("readyz: %d %s", rec.Code, rec.Body)
	}
	os.WriteFile(file, []byte(`@id("all") permit(principal, action, resource); @id("all") forbid(principal, action, resource);`), 0o644)
	if err := store.Load(); err == nil || !strings.Contains(err.Error(), `"all"`) {
		t.Fatalf("duplicate id: %v", err)
	}
	goodHash := store.Status().Hash
	// The same bad content read again (every poll) counts once.
	for i := 0; i < 3; i++ {
		_ = store.Load()
	}
	if rec := get("/readyz"); rec.Code != 200 || !strings.HasPrefix(rec.Body.String(), "degraded: serving 1 policies") ||
		!regexp.MustCompile(`latest reload failed \d+s ago`).MatchString(rec.Body.String()) || !strings.Contains(rec.Body.String(), `"all"`) {
		t.Fatalf("readyz after a bad edit: %d %s", rec.Code, rec.Body)
	}
	if _, st := post(t, s, "/v1/authorize", sarJSON("a", nil, "get", "", "pods", "x", "y")); !st.Allowed {
		t.Fatal("the last good set stopped serving")
	}
	metrics := get("/metrics").Body.String()
	for _, want := range []string{
		`kcedar_policy_reloads_total{status="failure"} 2`,
		`kcedar_policy_reloads_total{status="success"} 1`,
		`kcedar_policy_reload_last_timestamp_seconds{status="failure"} `,
		`kcedar_policy_reload_last_timestamp_seconds{status="success"} `,
		`kcedar_policy_set_info{hash="` + goodHash + `"} 1`,
		`kcedar_policy_load_error 1`,
		`kcedar_policies 1`,
		`kcedar_decisions_total{decision="Allow",endpoint="authorize"} 1`,
		`kcedar_decision_duration_seconds_bucket{endpoint="authorize",le="1e-06"}`,
		`kcedar_http_request_duration_seconds_count{code="200",endpoint="authorize"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if n := strings.Count(metrics, "kcedar_policy_set_info{"); n != 1 {
		t.Errorf("%d kcedar_policy_set_info series, want 1", n)
	}
	if rec := get("/healthz"); rec.Code != 200 {
		t.Fatal("healthz")
	}

	// A fix: ok again, one set_info series with the new hash.
	os.WriteFile(file, []byte(`@id("all2") permit(principal, action, resource);`), 0o644)
	if err := store.Load(); err != nil {
		t.Fatal(err)
	}
	if rec := get("/readyz"); rec.Code != 200 || !strings.HasPrefix(rec.Body.String(), "ok: serving 1 policies (generation 2") {
		t.Fatalf("readyz after the fix: %d %s", rec.Code, rec.Body)
	}
	metrics = get("/metrics").Body.String()
	if !strings.Contains(metrics, `kcedar_policy_set_info{hash="`+store.Status().Hash+`"} 1`) || strings.Count(metrics, "kcedar_policy_set_info{") != 1 || store.Status().Hash == goodHash {
		t.Errorf("set info after the fix:\n%s", grepLines(metrics, "kcedar_policy_set_info"))
	}
	if !strings.Contains(metrics, `kcedar_policy_reloads_total{status="success"} 2`) || !strings.Contains(metrics, "kcedar_policy_load_error 0") {
		t.Errorf("reload metrics after the fix:\n%s", grepLines(metrics, "kcedar_policy_"))
	}

	// Shutting down: 503 first.
	s.Drain()
	if rec := get("/readyz"); rec.Code != 503 || !strings.Contains(rec.Body.String(), "shutting down") {
		t.Fatalf("readyz while draining: %d %s", rec.Code, rec.Body)
	}
	if _, st := post(t, s, "/v1/authorize", sarJSON("a", nil, "get", "", "pods", "x", "y")); !st.Allowed {
		t.Fatal("a draining server stopped answering")
	}
}

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Reload under load: while clients decide continuously, the policy files
// flip between two valid sets and invalid edits. Every answer must be the
// answer of one of the two sets, and an invalid edit must keep the old set.
func TestReloadUnderLoad(t *testing.T) {
	setA := `@id("a") permit(principal == k8s::User::"alice", action == k8s::Action::"get", resource is core::pods);
@id("a2") forbid(principal == k8s::User::"bob", action, resource is core::pods);`
	setB := `@id("b") permit(principal == k8s::User::"bob", action == k8s::Action::"get", resource is core::pods);
@id("b2") forbid(principal == k8s::User::"alice", action, resource is core::pods);`
	invalid := []string{`permit(principal, action, resource) trailing`, `@id("x") permit(principal, action, resource); @id("x") permit(principal, action, resource);`, strings.Repeat("(", 200)}
	s, dir := newTestServer(t, setA)
	file := filepath.Join(dir, "p.cedar")
	type answer struct{ allowed, denied bool }
	// Under A: alice allowed, bob denied. Under B: alice denied, bob allowed.
	okAnswers := map[string][2]answer{
		"alice": {{true, false}, {false, true}},
		"bob":   {{false, true}, {true, false}},
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var requests, bad atomic.Int64
	var firstBad atomic.Value
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				user := []string{"alice", "bob"}[(i+w)%2]
				rec, st := post(t, s, "/v1/authorize", sarJSON(user, nil, "get", "", "pods", "ns", "p"))
				requests.Add(1)
				got := answer{st.Allowed, st.Denied}
				if rec.Code != 200 || (got != okAnswers[user][0] && got != okAnswers[user][1]) {
					bad.Add(1)
					firstBad.CompareAndSwap(nil, fmt.Sprintf("%s: %d %+v", user, rec.Code, st))
				}
			}
		}(w)
	}
	deadline := time.Now().Add(2 * time.Second)
	reloads := 0
	for i := 0; time.Now().Before(deadline); i++ {
		want := []string{setA, setB}[i%2]
		if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := s.source.Load(); err != nil {
			t.Fatalf("valid set refused: %v", err)
		}
		reloads++
		if err := os.WriteFile(file, []byte(invalid[i%len(invalid)]), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := s.source.Load(); err == nil {
			t.Fatal("invalid set accepted")
		}
		// The valid set keeps deciding after the invalid edit.
		_, st := post(t, s, "/v1/authorize", sarJSON("alice", nil, "get", "", "pods", "ns", "p"))
		if (st.Allowed) != (i%2 == 0) {
			t.Fatalf("after an invalid edit alice got %+v; the last good set is %s", st, []string{"A", "B"}[i%2])
		}
	}
	stop.Store(true)
	wg.Wait()
	if bad.Load() > 0 {
		t.Fatalf("%d of %d answers matched neither set; first: %v", bad.Load(), requests.Load(), firstBad.Load())
	}
	t.Logf("%d requests during %d reloads (and as many invalid edits), all answers from a whole set", requests.Load(), reloads)
}

func TestPanicNeverReachesClient(t *testing.T) {
	s, _ := newTestServer(t, `permit(principal, action, resource);`)
	s.Server.mux.HandleFunc("POST /boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/boom", bytes.NewReader(nil)))
	if rec.Code != 500 || strings.Contains(rec.Body.String(), "allowed") {
		t.Fatalf("panic: %d %s", rec.Code, rec.Body)
	}
}
