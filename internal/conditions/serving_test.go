package conditions

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

// swappable is a PolicySource a test replaces.
type swappable struct {
	cur atomic.Pointer[cedarlang.PolicySet]
}

func (s *swappable) Current() *cedarlang.PolicySet { return s.cur.Load() }

// Serving pairs the engine serving now with its conditions once per policy
// set: the same Engine (and evaluator) while the set serves, a new one after
// a swap, signing with the one codec throughout; its Evaluator answers before
// any set loads.
func TestServingPairsEachEngineOnce(t *testing.T) {
	src := &swappable{}
	codec := NewCodec(RandomKeyring())
	s := NewServing(src, schematest.Schema(), codec, engine.EngineOptions{CacheSize: 64})
	if s.Engine() != nil {
		t.Fatal("an engine before any policy set")
	}
	if s.Evaluator() == nil {
		t.Fatal("no evaluator before the first policy set: the callback needs only the schema")
	}
	src.cur.Store(policytest.Set(t, `permit(principal, action == k8s::Action::"get", resource is core::pods);`))
	first := s.Engine()
	if first == nil || s.Engine() != first || first.Evaluator() != s.Engine().Evaluator() {
		t.Fatal("the engine of one set is not built once")
	}
	src.cur.Store(policytest.Set(t, `forbid(principal, action, resource);`))
	second := s.Engine()
	if second == first || second.Engine == first.Engine || second.Policies() != src.Current() {
		t.Fatal("a swapped set kept the previous engine")
	}
	if second.Codec() != codec || first.Codec() != codec {
		t.Fatal("an engine signs with another codec")
	}
}

// Explain reports the decision as Report does (encoded, as the server
// answers), without admission data.
func TestExplainReportsAsReport(t *testing.T) {
	e := newEngine(schematest.Schema(), policytest.Set(t, `@id("on-n1") permit(principal == k8s::User::"bob", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };`), engine.EngineOptions{})
	req := policytest.ResourceRequest("bob", nil, "create", "", "pods", "", "a", "")
	ex, err := e.Explain(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := e.Report(context.Background(), req, nil)
	if ex.Decision != "Conditional" || ex.Decision != want.Decision || len(ex.Conditions) != 1 || ex.Conditions[0] != want.Conditions[0] {
		t.Fatalf("explained %s with conditions %+v, report %s with %+v", ex.Decision, ex.Conditions, want.Decision, want.Conditions)
	}
}
