package diff

import (
	"context"
	"runtime"
	"slices"
	"sync"

	"github.com/cedar-policy/cedar-go/types"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

func newEngine(s *schemagen.Schema, ps *cedarlang.PolicySet, ns entities.NamespaceLookup) engine.Authorizer {
	return engine.NewEngine(s, ps, engine.EngineOptions{Namespaces: ns})
}

// decider decides tasks with both sets. Each worker has its own engines
// where a policy reads namespace labels: their lookup answers with the
// world of the task at hand.
type decider struct {
	r              *run
	s              *schemagen.Schema
	oldSet, newSet *cedarlang.PolicySet
	given          entities.StaticNamespaces
	// worlds: some policy reads namespace labels.
	worlds bool
}

// decideAll decides every task with both sets, on every core, and keeps
// the cells that differ, in the order of the tasks. A leaf's tasks (which
// are contiguous) go to one worker, which shares work between them
// (decideLeaf).
func (d *decider) decideAll(tasks []task) []*cell {
	var leaves [][2]int // task ranges of one leaf
	for i := range tasks {
		if i == 0 || tasks[i].lf != tasks[i-1].lf {
			leaves = append(leaves, [2]int{i, i})
		}
		leaves[len(leaves)-1][1] = i + 1
	}
	workers := min(runtime.GOMAXPROCS(0), max(1, len(leaves)/16))
	differ := make([]*cell, len(tasks))
	var shared *[2]engine.Authorizer
	if !d.worlds {
		// nil keeps the engines' caches where no policy reads labels.
		shared = &[2]engine.Authorizer{newEngine(d.s, d.oldSet, nil), newEngine(d.s, d.newSet, nil)}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			engines, lookup := shared, &nsLookup{given: d.given}
			if engines == nil {
				engines = &[2]engine.Authorizer{newEngine(d.s, d.oldSet, lookup), newEngine(d.s, d.newSet, lookup)}
			}
			for i := w; i < len(leaves); i += workers {
				d.decideLeaf(engines, lookup, tasks[leaves[i][0]:leaves[i][1]], leaves[i][0], differ[leaves[i][0]:leaves[i][1]])
			}
		}()
	}
	wg.Wait()
	var out []*cell
	for _, c := range differ {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

// sideView is one set's policies alive at a leaf, and the leaf's groups
// they name (a mask; with system:nodes for a node's username, which it
// types): the set's decision depends on a user's groups only through
// these.
type sideView struct {
	facts   []*facts
	groups  uint32
	forbids bool // one of facts is a forbid
	known   map[viewKey]engine.Decision
}

// viewKey is a task as one set sees it: the groups it is in that the set
// names, and its namespace-label world.
type viewKey struct {
	in    uint32
	world int
}

// decideLeaf decides the tasks of one leaf (the first at index first)
// with both sets, into differ.
// Each set decides a task once per subset of the groups it names (a
// subset the other set tells apart reuses the decision), and not at all
// where its decision is plain (plainDecision).
func (d *decider) decideLeaf(engines *[2]engine.Authorizer, lookup *nsLookup, tasks []task, first int, differ []*cell) {
	lf := tasks[0].lf
	var views [2]sideView
	for i, side := range []uint8{sideOld, sideNew} {
		views[i] = sideView{facts: keep(lf.alive, func(f *facts) bool { return f.side&side != 0 }), known: map[viewKey]engine.Decision{}}
		views[i].forbids = slices.ContainsFunc(views[i].facts, func(f *facts) bool { return f.p.Effect == types.Forbid })
		for j, g := range lf.groups {
			if (g == user.NodesGroup && isNodeUsername(lf.user)) || slices.ContainsFunc(views[i].facts, func(f *facts) bool { return slices.Contains(f.groups, g) }) {
				views[i].groups |= 1 << j
			}
		}
	}
	ctx := context.Background()
	for j, t := range tasks {
		var ds [2]engine.Decision
		for i := range views {
			v := &views[i]
			k := viewKey{in: t.mask & v.groups, world: t.world}
			dec, ok := v.known[k]
			if !ok {
				in := t.in()
				if dec, ok = plainDecision(v.facts, lf, in); !ok {
					lookup.current = t.worldOf()
					dec = authorize(ctx, engines[i], lf, in, v.forbids, d.r)
				}
				v.known[k] = dec
			}
			ds[i] = dec
		}
		if k0, k1 := decisionKey(ds[0]), decisionKey(ds[1]); k0 != k1 {
			differ[j] = &cell{task: t, old: ds[0], new: ds[1], keys: [2]string{k0, k1}, seq: first + j}
		}
	}
}

// authorize is the engine's decision of the leaf's request by a user in
// groups. A request for every verb ("*") is decided as the engine decides
// it, each verb folded (no condition is of use for it) and combined:
// denied if one verb is, allowed if every verb is, else NoOpinion. Verbs
// the policies do not tell apart decide alike, so one of each class is
// asked (leaf.everyVerb). Without forbids (none of the set's policies
// alive there is one), the first verb not allowed settles it.
func authorize(ctx context.Context, e engine.Authorizer, lf *leaf, groups []string, forbids bool, r *run) engine.Decision {
	req := lf.x.request(lf.user, groups)
	if lf.x.verb != entities.Wildcard {
		return e.Authorize(ctx, req)
	}
	req.UnconditionalOnly = true
	var allowedBy []*cedarlang.Policy
	notAllowed := false
	for _, v := range lf.verbs(r) {
		req.Verb = v
		d := e.Authorize(ctx, req).FailureDecision()
		switch d.Type() {
		case engine.DecisionDeny:
			return engine.Denied(d.Policies(), nil)
		case engine.DecisionAllow:
			allowedBy = append(allowedBy, d.Policies()...)
		default:
			notAllowed = true
			if !forbids {
				return engine.NoOpinion(nil) // no verb can be denied
			}
		}
	}
	if notAllowed {
		return engine.NoOpinion(nil)
	}
	return engine.Allowed(allowedBy, nil)
}

// plainDecision is a set's decision of the leaf's user in groups where it
// needs no evaluation: NoOpinion where none of the set's policies alive
// there (fs) admits the principal, Allow where none of them is a forbid
// and one is a permit of every verb whose conditions hold for the target
// (surelyAllows). ok is false elsewhere.
func plainDecision(fs []*facts, lf *leaf, groups []string) (engine.Decision, bool) {
	uid := identityOf(lf.user, groups).UID
	var allows *cedarlang.Policy
	admitted := false
	for _, f := range fs {
		if !principalMay(f.p, uid) || !inScopeGroup(f.p, groups) {
			continue
		}
		admitted = true
		if f.p.Effect == types.Forbid {
			return engine.Decision{}, false
		}
		if allows == nil && surelyAllows(f, lf.x) {
			allows = f.p
		}
	}
	switch {
	case !admitted:
		return engine.NoOpinion(nil), true
	case allows != nil:
		return engine.Allowed([]*cedarlang.Policy{allows}, nil), true
	}
	return engine.Decision{}, false
}

// inScopeGroup reports whether a user in groups is in the group p's
// principal scope names, if it names one.
func inScopeGroup(p *cedarlang.Policy, groups []string) bool {
	var e types.EntityUID
	switch s := p.AST.Principal.(type) {
	case ast.ScopeTypeIn:
		e = s.Entity
	case ast.ScopeTypeIsIn:
		e = s.Entity
	default:
		return true
	}
	return e.Type != schemagen.GroupType || slices.Contains(groups, string(e.ID))
}

// surelyAllows reports whether f, a permit whose principal scope admits
// the user, allows every request at x: its action scope admits x's verb
// (every verb, for a request for every verb: allVerbs), its resource scope
// x's type, and its conditions read neither the action nor the context
// and only test the resource's type, true for x's.
func surelyAllows(f *facts, x point) bool {
	if f.p.Effect != types.Permit || !f.allVerbs() && (x.verb == entities.Wildcard || !f.admitsVerb(x.verb)) {
		return false
	}
	switch s := f.p.AST.Resource.(type) {
	case ast.ScopeTypeAll:
	case ast.ScopeTypeIs:
		if s.Type != x.entityType {
			return false
		}
	default:
		return false
	}
	for _, c := range f.p.AST.Conditions {
		holds, ok := typeTest(c.Body, x.entityType)
		if !ok || holds != (c.Condition == ast.ConditionWhen) {
			return false
		}
	}
	return true
}

// typeTest evaluates n, made only of `resource is T` tests, negations,
// conjunctions and disjunctions, for a resource of type t; ok is false
// for anything else.
func typeTest(n ast.IsNode, t types.EntityType) (holds, ok bool) {
	switch v := n.(type) {
	case ast.NodeTypeIs:
		return v.EntityType == t, isVarNode(v.Left, "resource")
	case ast.NodeTypeNot:
		holds, ok = typeTest(v.Arg, t)
		return !holds, ok
	case ast.NodeTypeAnd:
		l, okL := typeTest(v.Left, t)
		r, okR := typeTest(v.Right, t)
		return l && r, okL && okR
	case ast.NodeTypeOr:
		l, okL := typeTest(v.Left, t)
		r, okR := typeTest(v.Right, t)
		return l || r, okL && okR
	}
	return false, false
}
