package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) records(t *testing.T) []DecisionRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []DecisionRecord
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		var r DecisionRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("not a JSON line: %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func logServer(t *testing.T, log *DecisionLog) *served {
	s, _ := serveText(t, `
@id("alice-pods") permit(principal == k8s::User::"alice", action, resource is core::pods);
@id("no-secrets") forbid(principal == k8s::User::"mallory", action, resource is core::secrets);
`, serveConfig{server: Options{DecisionLog: log}})
	return s
}

// Every deny is logged with its fields; allows are sampled.
func TestDecisionLogSamplesAllowsKeepsDenies(t *testing.T) {
	var buf syncBuffer
	srv := logServer(t, NewDecisionLog(&buf, 10, 1e6, 1e6))
	for i := 0; i < 100; i++ {
		post(t, srv, "/v1/authorize", sarJSON("alice", []string{"dev"}, "get", "", "pods", "a", "p"))
		post(t, srv, "/v1/authorize", sarJSON("mallory", nil, "get", "", "secrets", "b", "s"))
	}
	var allows, denies int
	for _, r := range buf.records(t) {
		switch r.Decision {
		case "Allow":
			allows++
			if r.User != "alice" || r.Verb != "get" || r.Resource != "pods" || r.Namespace != "a" || r.Name != "p" || strings.Join(r.Policies, ",") != "alice-pods" || strings.Join(r.Groups, ",") != "dev" {
				t.Fatalf("allow record %+v", r)
			}
		case "Deny":
			denies++
			if r.User != "mallory" || strings.Join(r.Policies, ",") != "no-secrets" {
				t.Fatalf("deny record %+v", r)
			}
		default:
			t.Fatalf("record %+v", r)
		}
	}
	if denies != 100 || allows != 10 {
		t.Fatalf("%d denies (want all 100), %d allows (want 1 in 10)", denies, allows)
	}
}

// The rate limit bounds the lines and counts what it drops.
func TestDecisionLogRateLimit(t *testing.T) {
	var buf syncBuffer
	l := NewDecisionLog(&buf, 1, 0.0001, 5)
	for i := 0; i < 50; i++ {
		l.Log(DecisionRecord{Decision: "Deny"})
	}
	recs := buf.records(t)
	if len(recs) != 5 {
		t.Fatalf("%d lines, want the burst of 5", len(recs))
	}
	if l.dropped.Load() != 45 {
		t.Fatalf("dropped %d, want 45", l.dropped.Load())
	}
}

func TestUnauthenticatedIsWarned(t *testing.T) {
	var logs syncBuffer
	srv, _ := serveText(t, `permit(principal, action, resource);`, serveConfig{server: Options{Logger: newJSONLogger(&logs), RequireClientCert: true}})
	for i := 0; i < 50; i++ {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/authorize", strings.NewReader("{}")))
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("code %d", rec.Code)
		}
	}
	logs.mu.Lock()
	n := strings.Count(logs.b.String(), "unauthenticated webhook request refused")
	logs.mu.Unlock()
	if n == 0 || n > 15 {
		t.Fatalf("%d WARN lines for 50 refused requests; want some, rate limited", n)
	}
}

func newJSONLogger(w *syncBuffer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }
