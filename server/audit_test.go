package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/cedar"
)

const auditPolicies = `
@id("alice-pods") permit(principal == k8s::User::"alice", action, resource is core::pods);
@id("trial-forbid") @enforcement("audit")
forbid(principal, action == k8s::Action::"delete", resource is core::pods);
`

// auditServer serves auditPolicies with a decision log into buf.
func auditServer(t *testing.T, buf *syncBuffer, shadow bool) *served {
	// Sample 1 allow in 1000: a line with audit findings is never sampled out.
	s, _ := serveText(t, auditPolicies, serveConfig{authz: cedar.Options{Shadow: shadow}, server: Options{DecisionLog: NewDecisionLog(buf, 1000, 1e6, 1e6)}})
	return s
}

func metricsText(s http.Handler) string {
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

// The bar: an audit forbid on an allowed request leaves it allowed,
// and its would-deny appears in the decision log and the metric, never in
// the SubjectAccessReview status.
func TestAuditForbidLeavesAllowedAndIsLogged(t *testing.T) {
	var buf syncBuffer
	s := auditServer(t, &buf, false)
	rec, st := post(t, s, "/v1/authorize", sarJSON("alice", nil, "delete", "", "pods", "team-a", "web"))
	if !st.Allowed || st.Denied {
		t.Fatalf("the audit forbid changed the answer: %+v", st)
	}
	if strings.Contains(rec.Body.String(), "trial-forbid") {
		t.Fatalf("the audit policy reached the API server: %s", rec.Body)
	}
	recs := buf.records(t)
	if len(recs) != 1 || recs[0].Decision != "Allow" || len(recs[0].Audit) != 1 {
		t.Fatalf("decision log: %+v", recs)
	}
	if a := recs[0].Audit[0]; a.Policy != "trial-forbid" || a.Effect != "forbid" || a.Would != "deny" || recs[0].User != "alice" || recs[0].Verb != "delete" {
		t.Fatalf("audit record: %+v in %+v", a, recs[0])
	}
	if m := metricsText(s); !strings.Contains(m, `kcedar_audit_decisions_total{effect="forbid",would="deny"} 1`) {
		t.Fatalf("metrics:\n%s", grepLines(m, "kcedar_audit"))
	}
	// A request the audit policy does not match has no finding.
	post(t, s, "/v1/authorize", sarJSON("alice", nil, "get", "", "pods", "team-a", "web"))
	if m := metricsText(s); !strings.Contains(m, `kcedar_audit_decisions_total{effect="forbid",would="deny"} 1`) {
		t.Fatalf("metrics after a get:\n%s", grepLines(m, "kcedar_audit"))
	}
}

// --shadow: every policy is audit, so a request an enforced policy would
// allow gets NoOpinion, and the log says it would have been allowed.
func TestShadowAnswersNoOpinion(t *testing.T) {
	var buf syncBuffer
	s := auditServer(t, &buf, true)
	_, st := post(t, s, "/v1/authorize", sarJSON("alice", nil, "get", "", "pods", "team-a", "web"))
	if st.Allowed || st.Denied {
		t.Fatalf("shadow answered %+v, want NoOpinion", st)
	}
	recs := buf.records(t)
	if len(recs) != 1 || recs[0].Decision != "NoOpinion" || len(recs[0].Audit) != 1 || recs[0].Audit[0].Policy != "alice-pods" || recs[0].Audit[0].Would != "allow" {
		t.Fatalf("decision log: %+v", recs)
	}
	if m := metricsText(s); !strings.Contains(m, `kcedar_audit_decisions_total{effect="permit",would="allow"} 1`) {
		t.Fatalf("metrics:\n%s", grepLines(m, "kcedar_audit"))
	}
}
