package engine

import (
	"slices"
	"sort"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
)

// Audit mode. A policy annotated @enforcement("audit") (or every policy,
// under `kcedar serve --shadow`) is a candidate like any other, but the
// engine splits it off after the index lookup: the enforced candidates
// decide exactly as if it were absent, and each audit candidate is then
// evaluated beside them. Where enforcing it alone beside the others would
// have changed the answer, the Decision carries an AuditFinding. Findings go
// to the decision log, the metrics and the offline report, never to the API
// server (render.go does not read them).

// AuditFinding is an audit policy that would have changed a decision had it
// been enforced beside the enforced policies.
type AuditFinding struct {
	policy *cedarlang.Policy
	would  Decision
}

// Policy is the audit policy.
func (f AuditFinding) Policy() *cedarlang.Policy { return f.policy }

// Would is the decision with the policy enforced: Deny (would-deny), Allow
// (would-allow) or Conditional (would-be-conditional).
func (f AuditFinding) Would() Decision { return f.would }

// Kind names the finding: "would-deny", "would-allow" or
// "would-be-conditional".
func (f AuditFinding) Kind() string {
	switch f.would.Type() {
	case DecisionAllow:
		return "would-allow"
	case DecisionConditional:
		return "would-be-conditional"
	case DecisionNoOpinion:
		return "would-be-no-opinion" // adding a policy never gives this
	}
	return "would-deny"
}

// Residual is the audit policy's condition in a would-be-conditional
// finding (its residual, to log; never signed nor sent), or false.
func (f AuditFinding) Residual() (Residual, bool) {
	for _, rs := range [][]Residual{f.would.DenyConditions(), f.would.AllowConditions()} {
		for _, r := range rs {
			if r.Policy == f.policy {
				return r, true
			}
		}
	}
	return Residual{}, false
}

// isAudit reports whether p is evaluated in audit mode by this engine.
func (e *Engine) isAudit(p *cedarlang.Policy) bool { return e.shadow || p.IsAudit() }

// splitAudit splits candidates into the enforced and the audit ones. Without
// audit candidates it returns candidates itself (no allocation).
func (e *Engine) splitAudit(candidates []*cedarlang.Policy) (enforced, audit []*cedarlang.Policy) {
	n := 0
	for _, p := range candidates {
		if e.isAudit(p) {
			n++
		}
	}
	if n == 0 {
		return candidates, nil
	}
	enforced = make([]*cedarlang.Policy, 0, len(candidates)-n)
	audit = make([]*cedarlang.Policy, 0, n)
	for _, p := range candidates {
		if e.isAudit(p) {
			audit = append(audit, p)
		} else {
			enforced = append(enforced, p)
		}
	}
	return enforced, audit
}

// splitLookup splits a request's candidates into what a decision
// evaluates (the enforced forbids, then the enforced permits one at a time)
// and the audit policies, evaluated in full beside them. Under --shadow
// every candidate is an audit policy.
func (e *Engine) splitLookup(cur *cedarlang.Cursor) (enforced candidates, audit []*cedarlang.Policy) {
	if e.shadow {
		return candidates{}, append(slices.Clone(cur.Eager), cur.Rest()...)
	}
	forbids, audit := e.splitAudit(cur.Eager)
	return candidates{fixed: forbids, permits: cur}, audit
}

// enforcedOnly is the enforced ones of candidates.
func (e *Engine) enforcedOnly(candidates []*cedarlang.Policy) []*cedarlang.Policy {
	enforced, _ := e.splitAudit(candidates)
	return enforced
}

// auditFindings compares, for each audit result, the decision with that
// policy enforced beside the enforced results with d (what the enforced
// results decided), folded as d was (fold: nothing evaluates conditions).
func auditFindings(d Decision, enforced, audit []policyResult, entityType types.EntityType, fold bool) []AuditFinding {
	var out []AuditFinding
	for _, a := range audit {
		if a.kind == notSatisfied {
			continue // decide ignores it: nothing can change
		}
		with := append(enforced[:len(enforced):len(enforced)], a)
		would := decide(with, entityType)
		if fold && would.IsConditional() {
			would = would.FailureDecision()
		}
		if changesDecision(d, would) {
			out = append(out, AuditFinding{policy: a.policy, would: would})
		}
	}
	return sortFindings(out)
}

// changesDecision reports whether would (d with one more policy) answers
// differently from d: another type, or other conditions (one more condition,
// or an unconditional allow where there was none).
func changesDecision(d, would Decision) bool {
	if d.Type() != would.Type() {
		return true
	}
	if !d.IsConditional() {
		return false
	}
	if len(d.deny) != len(would.deny) || len(d.allow) != len(would.allow) {
		return true
	}
	return allowsUnconditionally(d) != allowsUnconditionally(would)
}

// allowsUnconditionally reports whether a conditional decision's allow
// condition is a satisfied permit (decide's single "true" condition).
func allowsUnconditionally(d Decision) bool {
	return len(d.allow) == 1 && isBool(d.allow[0].Expr, true)
}

// sortFindings orders findings by policy id.
func sortFindings(fs []AuditFinding) []AuditFinding {
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].policy.ID < fs[j].policy.ID })
	return fs
}

// auditAcrossCases is the findings of a request decided as several cases
// (every verb of "*", every world of an open optional attribute), combined
// into overall by everyCase's rule: for each audit policy with a finding in
// some case, the cases are combined again with that policy's would-be
// decisions, and it is a finding when the combined answer changes.
func auditAcrossCases(overall Decision, cases []Decision) []AuditFinding {
	byPolicy := map[*cedarlang.Policy]bool{}
	var order []*cedarlang.Policy
	for _, c := range cases {
		for _, f := range c.audit {
			if !byPolicy[f.policy] {
				byPolicy[f.policy] = true
				order = append(order, f.policy)
			}
		}
	}
	var out []AuditFinding
	for _, p := range order {
		all := everyCase{}
		for _, c := range cases {
			if all.add(wouldWith(c, p)) {
				break
			}
		}
		if would := all.decision(); would.Type() != overall.Type() {
			out = append(out, AuditFinding{policy: p, would: would})
		}
	}
	return sortFindings(out)
}

// wouldWith is case c's decision with audit policy p enforced.
func wouldWith(c Decision, p *cedarlang.Policy) Decision {
	for _, f := range c.audit {
		if f.policy == p {
			return f.would
		}
	}
	return c
}

// decideCases decides a request that stands for n cases (decideCase(i) is
// case i) by everyCase's rule. The enforced answer stops where it always
// did; with audit candidates the remaining cases are still decided for the
// findings, unless a case is denied (then no policy added could change the
// answer).
func decideCases(n int, stopAtNoOpinion, audit bool, decideCase func(i int) Decision) Decision {
	all := everyCase{stopAtNoOpinion: stopAtNoOpinion}
	var cases []Decision
	settled := false
	for i := range n {
		d := decideCase(i)
		if audit {
			cases = append(cases, d)
		}
		if !settled && all.add(d) {
			settled = true
			if !audit || all.denied {
				break
			}
		}
	}
	d := all.decision()
	if audit && !all.denied {
		d = d.withAudit(auditAcrossCases(d, cases))
	}
	return d
}

// candidateFacts reports whether an enforced forbid, and whether an audit
// policy, is a candidate for req with any of verbs.
func (e *Engine) candidateFacts(req *entities.Request, verbs []string) (forbid, audit bool) {
	target := entities.ResolveTarget(e.schema, req)
	for _, verb := range verbs {
		cur := e.policies.Lookup(cedarlang.NewCandidateQuery(req, target, verb))
		if e.shadow {
			// Every policy is an audit policy.
			audit = audit || !cur.Empty()
		} else {
			for _, p := range cur.Eager {
				audit = audit || p.IsAudit()
				forbid = forbid || !p.IsAudit() && p.Effect == types.Forbid
			}
		}
		cur.Release()
	}
	return forbid, audit
}

// hasEnforcedCandidates reports whether cur holds an enforced policy.
func (e *Engine) hasEnforcedCandidates(cur *cedarlang.Cursor) bool {
	if e.shadow {
		return false
	}
	return cur.HasPermits() || slices.ContainsFunc(cur.Eager, func(p *cedarlang.Policy) bool { return !p.IsAudit() })
}
