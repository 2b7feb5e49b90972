package engine

import (
	"context"
	"math/rand"
	"slices"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// A request whose caller takes no conditions (UnconditionalOnly: a plain
// SubjectAccessReview, the escalation check) is decided folded: the engine
// stops at the first forbid that may deny and skips permits that can only
// leave a condition. That must be exactly the full decision folded
// afterwards (Decision.FailureDecision): the same type, the same deciding
// permits of an Allow, and never Conditional. Over the zoo, the platform
// shapes (with namespace labels) and random sets of policies on objects.
func TestFoldedAsDecidedEqualsFoldedAfter(t *testing.T) {
	requests := 4000
	if testing.Short() || raceEnabled {
		requests = 800
	}
	folds := checkFoldedAsDecided(t, "zoo", policytest.Set(t, zoo.Policies(400, 7)), zoo.Requests(400, requests, 11), nil)
	for seed := uint64(1); seed <= 3; seed++ {
		set, reqs, ns := platformCase(t, 2000, requests, seed)
		folds += checkFoldedAsDecided(t, "platform", set, reqs, ns)
	}
	rng := rand.New(rand.NewSource(5681))
	for range requests / 40 {
		set := policytest.Set(t, testgen.ObjectPolicies(rng, 1+rng.Intn(5)))
		reqs := make([]*entities.Request, 40)
		for i := range reqs {
			reqs[i] = testgen.ObjectAdmission(rng).Req
		}
		folds += checkFoldedAsDecided(t, "objects", set, reqs, nil)
	}
	// The test can only fail where the full decision is conditional.
	if folds < requests/2 {
		t.Errorf("only %d conditional decisions: the request generators are too weak", folds)
	}
}

// checkFoldedAsDecided decides each request of reqs in full and folded as
// decided, with one cached engine (so that a decision cached for one
// cannot stand in for the other), fails the test on the first difference,
// and returns how many full decisions were conditional.
func checkFoldedAsDecided(t *testing.T, name string, set *cedarlang.PolicySet, reqs []*entities.Request, ns platformNamespaces) (folds int) {
	t.Helper()
	opts := EngineOptions{CacheSize: DefaultCacheSize}
	if ns != nil {
		opts.Namespaces = ns
	}
	e := NewEngine(embeddedschema.Schema(t), set, opts)
	for i, req := range reqs {
		full := e.Authorize(context.Background(), req)
		u := *req
		u.UnconditionalOnly = true
		got := e.Authorize(context.Background(), &u)
		if full.IsConditional() {
			folds++
		}
		want := full.FailureDecision()
		if got.IsConditional() || got.Type() != want.Type() {
			t.Fatalf("%s request %d %s: folded as decided %v, the full decision %v folds to %v", name, i, req, got.Type(), full.Type(), want.Type())
		}
		if got.IsAllowed() && !slices.Equal(ids(got.Policies()), ids(want.Policies())) {
			t.Fatalf("%s request %d %s: allowed by %v, the full decision by %v", name, i, req, ids(got.Policies()), ids(want.Policies()))
		}
	}
	return folds
}
