package diff

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	publicast "github.com/cedar-policy/cedar-go/ast"
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// MaxGroups bounds the groups whose memberships are enumerated at one
// point (2^MaxGroups subsets); beyond it the point is not decided exactly.
const MaxGroups = 8

// maxDecisions bounds the requests decided; beyond it the rest is reported
// as not decided exactly.
const maxDecisions = 400000

// Result is the effect of a change on access.
type Result struct {
	// Changed are the ids of the policies that differ (removed, added or edited).
	Removed, Added []string
	// Regions are the regions of requests whose decision changes.
	Regions []Region
	// Inexact names the constructs the method could not decide exactly
	// (empty when every region is exact).
	Inexact []string
	// Decided is the number of requests decided (with both sets).
	Decided int
	run     *run
}

// differing returns the enforced policies of a whose access text is not
// among b's.
func differing(a, b *cedarlang.PolicySet) []*cedarlang.Policy {
	have := map[string]bool{}
	for _, p := range b.Policies {
		if !p.IsAudit() {
			have[cedarlang.AccessText(p)] = true
		}
	}
	var out []*cedarlang.Policy
	for _, p := range a.Policies {
		if !p.IsAudit() && !have[cedarlang.AccessText(p)] {
			out = append(out, p)
		}
	}
	return out
}

// Options are Compare's options.
type Options struct {
	// Namespaces are Namespace objects by name: a namespace given is
	// decided with its labels; every other namespace with every
	// assignment of the labels the policies name.
	Namespaces entities.StaticNamespaces
}

// Compare finds every region of requests decided differently by the
// policies old and new (both against schema s).
func Compare(s *schemagen.Schema, oldSet, newSet *cedarlang.PolicySet) *Result {
	return CompareWith(s, oldSet, newSet, Options{})
}

// CompareWith is Compare with options.
func CompareWith(s *schemagen.Schema, oldSet, newSet *cedarlang.PolicySet, opts Options) *Result {
	dOld, dNew := differing(oldSet, newSet), differing(newSet, oldSet)
	res := &Result{Removed: ids(dOld), Added: ids(dNew)}
	if len(dOld)+len(dNew) == 0 {
		return res
	}
	reach := unionReach(append(slices.Clone(dOld), dNew...))
	relevant := relevantFacts(oldSet, newSet, reach)
	lits := newLiterals()
	worlds := false
	for _, f := range relevant {
		lits.add(f.p)
		worlds = worlds || f.readsNS
	}
	r := &run{s: s, sp: newSpace(s, lits), relevant: relevant, inexact: map[string]bool{}, given: opts.Namespaces,
		dStrings: stringsOf(keep(relevant, (*facts).differs))}
	res.run = r
	r.enumerate(reach, lits)
	d := &decider{r: r, s: s, oldSet: oldSet, newSet: newSet, given: opts.Namespaces, worlds: worlds}
	r.cells = d.decideAll(r.tasks)
	res.Decided = len(r.tasks)
	res.Inexact = sortedKeys(r.inexact)
	res.Regions = r.regions(len(res.Inexact) == 0)
	if len(res.Regions) == 0 && len(res.Inexact) > 0 {
		res.Regions = []Region{undecided(dOld, dNew, res.Inexact)}
	}
	r.tasks = nil
	return res
}

func ids(ps []*cedarlang.Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

// unionReach is where the policies can match: the union of their reaches
// (nil: every value).
func unionReach(ps []*cedarlang.Policy) cedarlang.Reach {
	var u cedarlang.Reach
	for i, p := range ps {
		r := reachOf(p)
		if i == 0 {
			u = r
			continue
		}
		u.Verbs = unionOrAll(u.Verbs, r.Verbs)
		u.Names = unionOrAll(u.Names, r.Names)
		u.Paths = unionOrAll(u.Paths, r.Paths)
		if u.Types == nil || r.Types == nil {
			u.Types = nil
		} else {
			u.Types = append(u.Types, r.Types...)
		}
	}
	return u
}

func unionOrAll(a, b []string) []string {
	if a == nil || b == nil {
		return nil
	}
	return append(slices.Clone(a), b...)
}

// reachOf is where p can match. A forbid's conditions bound it only where
// the attributes they read are present (reading an absent one errors, and
// the forbid denies), so a forbid's reach is that of its scope alone.
func reachOf(p *cedarlang.Policy) cedarlang.Reach {
	if p.Effect != types.Forbid || len(p.AST.Conditions) == 0 {
		return cedarlang.ReachOf(p)
	}
	scope := *p.AST
	scope.Conditions = nil
	q := *p
	q.AST = &scope
	return cedarlang.ReachOf(&q)
}

// overlaps reports whether two reaches share a type. Verbs are not
// compared: a "*" request is decided as every verb at once, so a policy of
// any verb can change its decision.
func overlaps(a, b cedarlang.Reach) bool {
	return a.Types == nil || b.Types == nil || slices.ContainsFunc(a.Types, func(t types.EntityType) bool { return slices.Contains(b.Types, t) })
}

// decisionKey tells decisions apart: by type, and conditional ones by the
// set of their conditions' texts.
func decisionKey(d engine.Decision) string {
	if !d.IsConditional() {
		return d.Type().String()
	}
	deny, allow := conditionTexts(d)
	var parts []string
	for t := range deny {
		parts = append(parts, "deny "+t)
	}
	for t := range allow {
		parts = append(parts, "allow "+t)
	}
	sort.Strings(parts)
	return "Conditional\n" + strings.Join(parts, "\n")
}

// conditionTexts are the texts of a conditional decision's deny and allow
// conditions, each with its entity type (the conditions of one side are
// alternatives: a repeated one says nothing more).
func conditionTexts(d engine.Decision) (deny, allow map[string]bool) {
	texts := func(rs []engine.Residual) map[string]bool {
		out := map[string]bool{}
		for _, r := range rs {
			out[string(r.EntityType)+" "+exprText(r.Expr)] = true
		}
		return out
	}
	return texts(d.DenyConditions()), texts(d.AllowConditions())
}

// mayWiden reports whether the conditional decision n may allow an object
// the conditional decision o does not. A conditional decision allows when
// no deny condition holds (or fails) and an allow condition holds, so n
// allows no more than o when each of n's allow conditions is one of o's
// and each of o's deny conditions is one of n's. Conditions are compared as
// text: a rewording that allows nothing more still counts as widening.
func mayWiden(o, n engine.Decision) bool {
	oDeny, oAllow := conditionTexts(o)
	nDeny, nAllow := conditionTexts(n)
	for t := range nAllow {
		if !oAllow[t] {
			return true
		}
	}
	for t := range oDeny {
		if !nDeny[t] {
			return true
		}
	}
	return false
}

// exprText is the Cedar text of an expression.
func exprText(n ast.IsNode) string {
	p := ast.Permit().When(ast.NewNode(n))
	return string((*publicast.Policy)(p).MarshalCedar())
}

// undecided is the region reported when the method found no change but
// could not decide exactly: where the differing policies reach, old's and
// new's on their sides.
func undecided(dOld, dNew []*cedarlang.Policy, inexact []string) Region {
	return Region{Subject: Subject{Kind: KindAnyone}, Change: Change{From: "?", To: "?"},
		OldPolicies: ids(dOld), NewPolicies: ids(dNew), Exact: false, Note: fmt.Sprintf("not decided exactly: %s", strings.Join(inexact, ", "))}
}
