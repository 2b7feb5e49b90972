package cedarlang

import (
	"slices"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/parallel"
)

// UnnarrowedReport is what Unnarrowed found.
type UnnarrowedReport struct {
	// Policies: every policy for which the index finds no access predicate:
	// nothing but its verbs, resource types and principal type narrows it
	// (no value or `like` pattern on any path the index keys, or only ones
	// more policies share than its principal type), in policy order.
	Policies []*Policy
	// Max: the most of them one request meets, for requests with Verb on
	// ResourceType ("" when that is any verb or type).
	Max                int
	Verb, ResourceType string
}

// Unnarrowed reports the policies the index cannot narrow beyond their verbs,
// resource types and principal type (those it files under "rest", or keys
// on the principal's type alone): each is evaluated for every request of
// those, so many of them make decisions cost more as the set grows. It
// chooses keys as the index does (chooseKeys, over the whole set's counts).
func Unnarrowed(policies []*Policy) UnnarrowedReport {
	var r UnnarrowedReport
	verbs, rtypes := map[string]bool{"": true}, map[string]bool{"": true}
	rest := map[[2]string]int{}
	// Each policy's verbs and types, when nothing else narrows it.
	type found struct {
		vs, ts []string
		ok     bool
	}
	all := make([]found, len(policies))
	exts, count := newIndex(^uint64(0), ^uint64(0)).extractAll(policies)
	parallel.For(len(policies), func(i int) {
		e := &exts[i]
		if primary, _ := chooseKeys(resolveAlts(e.cons, count), count); primary >= 0 && e.cons[primary].dim != dPType {
			return
		}
		strs := func(c constraint) []string { return c.vals }
		vs, okV := intersect(e.cons, dVerb, strs)
		ts, okT := intersect(e.cons, dRType, strs)
		if okV && len(vs) == 0 || okT && len(ts) == 0 {
			return // no verb or type: never a candidate
		}
		if !okV {
			vs = []string{""}
		}
		if !okT {
			ts = []string{""}
		}
		all[i] = found{vs: slices.Compact(slices.Sorted(slices.Values(vs))), ts: slices.Compact(slices.Sorted(slices.Values(ts))), ok: true}
	})
	for i, f := range all {
		if !f.ok {
			continue
		}
		r.Policies = append(r.Policies, policies[i])
		for _, v := range f.vs {
			verbs[v] = true
			for _, t := range f.ts {
				rtypes[t] = true
				rest[[2]string{v, t}]++
			}
		}
	}
	// A request has one verb and one type: it meets the policies of (verb,
	// type), (verb, any), (any, type) and (any, any); "" stands for a verb
	// or type no such policy names.
	for v := range verbs {
		for t := range rtypes {
			n := 0
			seen := map[[2]string]bool{}
			for _, k := range [][2]string{{v, t}, {v, ""}, {"", t}, {"", ""}} {
				if !seen[k] {
					seen[k] = true
					n += rest[k]
				}
			}
			if n > r.Max || n == r.Max && (v < r.Verb || v == r.Verb && t < r.ResourceType) {
				r.Max, r.Verb, r.ResourceType = n, v, t
			}
		}
	}
	return r
}

// ScopeResourceType is the one resource type a resource scope allows
// (`resource is T`, `is T in ...`, `== T::"..."`); ok is false when the scope
// allows every type.
func ScopeResourceType(s ast.IsResourceScopeNode) (t types.EntityType, ok bool) {
	switch v := s.(type) {
	case ast.ScopeTypeIs:
		return v.Type, true
	case ast.ScopeTypeIsIn:
		return v.Type, true
	case ast.ScopeTypeEq:
		return v.Entity.Type, true
	}
	return "", false
}

// put adds policy i to keyed under b, tag and constraint c's values (each
