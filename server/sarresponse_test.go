package server

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/kcedar/kcedar/internal/wire"
)

// TestRenderedAnswersAreWriteJSONs: a kept answer is byte for byte what
// writeJSON writes for it, the first time and from the cache, conditions or
// not, whatever its reason holds.
func TestRenderedAnswersAreWriteJSONs(t *testing.T) {
	statuses := []wire.SubjectAccessReviewStatus{
		{SubjectAccessReviewStatus: authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "kcedar: allowed by policy p"}},
		{SubjectAccessReviewStatus: authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: `<&> "quoted" ` + "\u2028 \xff é"}},
		{SubjectAccessReviewStatus: authorizationv1.SubjectAccessReviewStatus{EvaluationError: "boom"}},
		{},
		{ConditionalDecision: &wire.ConditionsAwareDecision{Type: wire.DecisionTypeConditionsMap, ConditionsMap: &wire.ConditionsMap{}}},
	}
	for _, st := range statuses {
		want := httptest.NewRecorder()
		writeJSON(want, sarResponse{APIVersion: sarType.APIVersion, Kind: sarType.Kind, Status: st})
		for round := 0; round < 2; round++ {
			got := httptest.NewRecorder()
			writeSARResponse(got, st)
			if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || got.Header().Get("Content-Type") != "application/json" {
				t.Errorf("round %d: %s (%s), want %s", round, got.Body, got.Header().Get("Content-Type"), want.Body)
			}
		}
	}
}

// TestRenderedAnswersAreBounded: past renderedAnswersMax reasons the cache
// starts over, and every answer stays right.
func TestRenderedAnswersAreBounded(t *testing.T) {
	var r renderedAnswers
	for i := 0; i < 2*renderedAnswersMax+10; i++ {
		st := authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: fmt.Sprintf("policy %d", i)}
		want := fmt.Sprintf(`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","status":{"allowed":true,"reason":"policy %d"}}`+"\n", i)
		if got := string(r.get(st)); got != want {
			t.Fatalf("%d: %s, want %s", i, got, want)
		}
	}
	kept := 0
	r.byStatus.Range(func(any, any) bool { kept++; return true })
	if kept > renderedAnswersMax || r.n.Load() != int64(kept) {
		t.Errorf("%d answers kept (count %d), at most %d", kept, r.n.Load(), renderedAnswersMax)
	}
}
