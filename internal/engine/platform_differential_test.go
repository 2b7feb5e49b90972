package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// platformNamespaces is a fixed namespace lookup.
type platformNamespaces map[string]map[string]any

func (n platformNamespaces) Namespace(name string) (map[string]any, bool) {
	o, ok := n[name]
	return o, ok
}

// Over the platform shapes (testgen.Platform: the user's extra, namespace
// labels, `like` suffixes and inner wildcards, name sets, containsAny over
// groups, hasTag; each family, its constants and the mix drawn per seed),
// deciding with the index gives exactly the outcome of deciding with every
// policy as a candidate, for requests with and without extra, in
// namespaces with, without and of unknown labels, open and cluster-scoped,
// with empty, "*" and unicode values.
func TestIndexDifferentialPlatform(t *testing.T) {
	const policies = 500
	requests := 2500
	if testing.Short() || raceEnabled {
		requests = 500
	}
	for seed := uint64(1); seed <= 4; seed++ {
		set, reqs, ns := platformCase(t, policies, requests, seed)
		stats := comparePlatform(t, set, set.Unindexed(), reqs, ns, true)
		t.Logf("seed %d, %d policies, mix %v: %v", seed, policies, testgen.NewPlatformMix(policies, seed, false).Weights, stats)
		for _, k := range []string{"Allow", "Deny", "NoOpinion"} {
			if stats[k] < requests/100 {
				t.Errorf("seed %d: only %d %s outcomes: the request generator is too weak", seed, stats[k], k)
			}
		}
	}
}

// The differential test catches a wrong key: an index that files the extra
// and label constraints under other values decides differently.
func TestIndexDifferentialPlatformCatchesWrongKeys(t *testing.T) {
	set, reqs, ns := platformCase(t, 300, 600, 9)
	stats := comparePlatform(t, set.MisKeyedForTest(), set.Unindexed(), reqs, ns, false)
	if stats["differ"] == 0 {
		t.Fatalf("a mis-keyed index decided %d requests like the unindexed set", len(reqs))
	}
	t.Logf("a mis-keyed index: %d of %d decisions differ", stats["differ"], len(reqs))
}

// The index narrows the platform shapes: a request meets few candidates.
func TestIndexNarrowsPlatform(t *testing.T) {
	set, reqs, _ := platformCase(t, 4000, 400, 5)
	s := embeddedschema.Schema(t)
	most := 0
	for _, req := range reqs {
		if req.Name == "" || req.Namespace == "" {
			continue // open (and cluster-scoped) requests meet every policy keyed on the open value
		}
		q := cedarlang.NewCandidateQuery(req, entities.ResolveTarget(s, req), req.Verb)
		q.NamespaceLabels = cedarlang.QueryLabels{State: cedarlang.LabelsKnown}
		most = max(most, len(set.Candidates(q)))
	}
	if most > 60 {
		t.Errorf("a request meets %d of 4000 platform policies", most)
	}
	t.Logf("at most %d candidates of 4000", most)
}

// The index narrows every platform shape beyond its verbs and types (the
// user's extra, labels, `like` prefixes, suffixes and inner literals on
// names, namespaces and usernames, name sets, groups): none is a candidate
// for every request of its verb and type, whatever families a seed draws.
func TestPlatformShapesAreAllNarrowed(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		set := policySetOf(t, "platform", testgen.Platform(4000, seed, false))
		if r := cedarlang.Unnarrowed(set.Policies); len(r.Policies) > 0 {
			t.Errorf("seed %d: %d policies only their verbs and types narrow, %d of them for %s %s, such as %s", seed, len(r.Policies), r.Max, r.Verb, r.ResourceType, r.Policies[0].Text())
		}
	}
}

func platformCase(t *testing.T, policies, requests int, seed uint64) (*cedarlang.PolicySet, []*entities.Request, platformNamespaces) {
	t.Helper()
	set := policySetOf(t, "platform", testgen.Platform(policies, seed, false))
	m := testgen.NewPlatformMix(policies, seed, false)
	return set, testgen.PlatformRequests(policies, requests, seed, false), platformNamespaces(testgen.PlatformNamespaces(m))
}

// comparePlatform decides reqs over got and want (engines with the
// namespace lookup ns) and counts the outcomes by kind; with strict, the
// first difference fails the test, else differences are counted.
func comparePlatform(t *testing.T, got, want *cedarlang.PolicySet, reqs []*entities.Request, ns platformNamespaces, strict bool) map[string]int {
	t.Helper()
	s := embeddedschema.Schema(t)
	az := NewEngine(s, got, EngineOptions{Namespaces: ns})
	ref := NewEngine(s, want, EngineOptions{Namespaces: ns})
	// The one-phase oracle decides with the enforced policies: audit-mode
	// ones are reported on, never decide.
	orc := policytest.OraclePolicies(slices.DeleteFunc(slices.Clone(want.Policies), (*cedarlang.Policy).IsAudit))
	stats := map[string]int{}
	for i, req := range reqs {
		g, w := az.Authorize(context.Background(), req), ref.Authorize(context.Background(), req)
		if obj, known := knownPlatformRequest(s, req, ns); known {
			// Fully known: the one-phase oracle (cedar-go over every policy).
			if want := policytest.NamespaceOracle(s, orc, req, obj); g.FailureDecision().Type().String() != want {
				if strict {
					t.Fatalf("request %d %s extra %v: indexed %v, one-phase oracle %s", i, req, req.User.Extra, g.Type(), want)
				}
				stats["differ"]++
				continue
			}
			stats["one-phase"]++
		}
		kind := g.Type().String()
		if g.IsConditional() {
			kind = "conditional"
		}
		stats[kind]++
		for _, conditions := range []bool{true, false} {
			if !conditions {
				g, w = g.FailureDecision(), w.FailureDecision()
			}
			if d := outcomeDiff(g, w, got); d != "" {
				if strict {
					t.Fatalf("request %d %s extra %v (conditions %v): indexed and unindexed outcomes differ: %s", i, req, req.User.Extra, conditions, d)
				}
				stats["differ"]++
				break
			}
		}
	}
	return stats
}

// knownPlatformRequest reports whether req leaves nothing open (one verb, a name, and
// a namespace the lookup knows where the resource has a namespaceObject),
// with its namespace's object.
func knownPlatformRequest(s *schemagen.Schema, req *entities.Request, ns platformNamespaces) (map[string]any, bool) {
	if req.Name == "" || req.Verb == entities.Wildcard {
		return nil, false
	}
	if !entities.ResolveTarget(s, req).HasNamespaceObject() {
		return nil, true
	}
	obj, ok := ns[req.Namespace]
	return obj, ok && req.Namespace != ""
}
