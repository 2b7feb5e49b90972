package generate

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/format"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarlex"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Result is the generated policies.
type Result struct {
	// Text is every policy, after a comment with the counts, laid out as
	// kcedar fmt lays Cedar out.
	Text []byte
	// Subjects are the policies per subject, each laid out the same way, in
	// the order of Text.
	Subjects []SubjectPolicies
	Count    int
	Stats    Stats
	Outcome  Outcome
}

// SubjectPolicies are one subject's policies.
type SubjectPolicies struct {
	// Slug names the subject as policy ids do (alice, sa/ns/name, group/g).
	Slug string
	Text []byte
	// Parts are the subject's policies by the namespace that bounds them:
	// a NamespacedCedarPolicy there can hold them. The policies no one
	// namespace bounds (cluster-wide, in several namespaces, non-resource
	// URLs) are the part of namespace "", first if any.
	Parts []Part
}

// Part is a subject's policies bounded by one namespace (a valid
// namespace name), or, for Namespace "", by none.
type Part struct {
	Namespace string
	Text      []byte
}

// maxRounds bounds the rounds of tightening; each round makes at least one
// grant stricter, and a withheld grant is final.
const maxRounds = 64

// Policies writes the policies for what was added so far. The policies are
// checked with the engine against a request of every logged forbidden
// permission: a policy that would allow one is tightened (its names
// listed, a group's grant written per member, or at last withheld) until
// none does. Every text written is parsed again and checked to be exactly
// the policies built (format.Verify): names from the log are only ever
// quoted strings and escaped comments.
func (g *Generator) Policies() (*Result, error) {
	t := &tightening{exact: map[grantKey]bool{}, literal: map[grantKey]bool{}, split: map[grantKey]bool{}, withheld: map[grantKey]bool{}}
	for range maxRounds {
		grants, outcome := g.grants(t)
		ps := g.merge(grants, t, &outcome)
		assignIDs(ps)
		// Checked as enforced: an audit policy never allows.
		var f cedarlex.File
		if err := g.render(&f, ps, false); err != nil {
			return nil, err
		}
		parsed, err := format.VerifyFile("generated", &f)
		if err != nil {
			return nil, err
		}
		bad, err := g.allowsForbidden(parsed, ps)
		if err != nil {
			return nil, err
		}
		if len(bad) == 0 {
			return g.result(ps, outcome)
		}
		for _, b := range bad {
			t.tighten(b.policy, b.byPattern)
		}
	}
	return nil, fmt.Errorf("the policies still allow a forbidden request after %d rounds of tightening (a bug in kcedar generate)", maxRounds)
}

// tighten makes the grants of p stricter by one step: byPattern, a
// request it must not allow is allowed through a generalized name.
func (t *tightening) tighten(p *policy, byPattern bool) {
	for _, k := range p.keys {
		switch {
		case p.names.any && !p.names.strict && !t.exact[k]:
			t.exact[k] = true
		case byPattern && !t.literal[k]:
			t.literal[k] = true
		case k.isGroup && !t.split[k]:
			t.split[k] = true
		default:
			t.withheld[k] = true
		}
	}
}

// render writes the policies into f, a blank line between two; audit
// annotates them @enforcement("audit").
func (g *Generator) render(f *cedarlex.File, ps []*policy, audit bool) error {
	for i, p := range ps {
		cp := p.build(g.schema, audit)
		cp.Blank = i > 0
		if err := f.Add(cp); err != nil {
			return fmt.Errorf("policy %s cannot be written (a bug in kcedar generate): %w", cedarlex.Shorten(p.id), err)
		}
	}
	return nil
}

// badPolicy is a policy that allows a request it must not; byPattern: one
// such request only through a generalized name.
type badPolicy struct {
	*policy
	byPattern bool
}

// allowsForbidden decides a request of every logged forbidden permission,
// and of every permission the existing policies allow only on conditions,
// with the parsed policies and returns the policies that allow one. A
// policy that allows one but is none of ps (which Verify rules out) is an
// error: every policy of the text is checked, not only those built.
func (g *Generator) allowsForbidden(parsed []*cedarlang.Policy, ps []*policy) ([]badPolicy, error) {
	if len(parsed) == 0 || len(g.forbiddenReqs)+len(g.conditionalReqs) == 0 {
		return nil, nil
	}
	set, err := cedarlang.NewPolicySet(parsed)
	if err != nil {
		return nil, fmt.Errorf("the generated policies do not load (a bug in kcedar generate): %w", err)
	}
	e := engine.NewEngine(g.schema, set, engine.EngineOptions{})
	byID := make(map[string]*policy, len(ps))
	for _, p := range ps {
		byID[p.id] = p
	}
	bad := map[string]*badPolicy{}
	for _, reqs := range []map[userPerm]*entities.Request{g.forbiddenReqs, g.conditionalReqs} {
		for _, req := range reqs {
			d := e.Authorize(context.Background(), req)
			if !d.IsAllowed() {
				continue
			}
			for _, cp := range d.Policies() {
				p := byID[cp.ID]
				if p == nil {
					return nil, fmt.Errorf("policy %s of the generated text, which kcedar generate did not build, allows the request %s it must not (a bug in kcedar generate)",
						cedarlex.Shorten(cp.ID), req)
				}
				if bad[p.id] == nil {
					bad[p.id] = &badPolicy{policy: p}
				}
				bad[p.id].byPattern = bad[p.id].byPattern || p.names.byPatternOnly(req)
			}
		}
	}
	out := make([]badPolicy, 0, len(bad))
	for _, b := range bad {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out, nil
}

// result lays the policies out: the header and all, and per subject,
// each checked to be the policies built.
func (g *Generator) result(ps []*policy, outcome Outcome) (*Result, error) {
	res := &Result{Count: len(ps), Stats: g.stats, Outcome: outcome}
	var all cedarlex.File
	g.header(&all, len(ps), outcome)
	for i := 0; i < len(ps); {
		j := i
		for j < len(ps) && ps[j].subject == ps[i].subject {
			j++
		}
		all.Blank()
		if err := g.render(&all, ps[i:j], g.opts.Audit); err != nil {
			return nil, err
		}
		laid, err := g.layOutPolicies(ps[i:j])
		if err != nil {
			return nil, err
		}
		parts, err := g.parts(ps[i:j])
		if err != nil {
			return nil, err
		}
		res.Subjects = append(res.Subjects, SubjectPolicies{Slug: ps[i].subject.slug(), Text: laid, Parts: parts})
		i = j
	}
	laid, err := layOut(&all)
	if err != nil {
		return nil, err
	}
	res.Text = laid
	return res, nil
}

// layOutPolicies is the text of ps alone, laid out and checked.
func (g *Generator) layOutPolicies(ps []*policy) ([]byte, error) {
	var f cedarlex.File
	if err := g.render(&f, ps, g.opts.Audit); err != nil {
		return nil, err
	}
	return layOut(&f)
}

// parts splits one subject's policies by the namespace that bounds them
// (boundedBy), the unbounded part first, each laid out and checked.
func (g *Generator) parts(ps []*policy) ([]Part, error) {
	byNS := map[string][]*policy{}
	for _, p := range ps {
		ns := boundedBy(p)
		byNS[ns] = append(byNS[ns], p)
	}
	namespaces := make([]string, 0, len(byNS))
	for ns := range byNS {
		namespaces = append(namespaces, ns)
	}
	slices.Sort(namespaces)
	parts := make([]Part, 0, len(namespaces))
	for _, ns := range namespaces {
		text, err := g.layOutPolicies(byNS[ns])
		if err != nil {
			return nil, err
		}
		parts = append(parts, Part{Namespace: ns, Text: text})
	}
	return parts, nil
}

// layOut is f's text laid out as kcedar fmt lays it out, checked to be
// exactly the policies f built.
func layOut(f *cedarlex.File) ([]byte, error) {
	laid, err := format.Source("generated", f.Bytes())
	if err != nil {
		return nil, err
	}
	if _, err := format.Verify("generated", laid.Text, f.Built()); err != nil {
		return nil, err
	}
	return laid.Text, nil
}

// header writes the comment before the policies: what they were generated
// from and what they leave out.
func (g *Generator) header(f *cedarlex.File, n int, o Outcome) {
	s := g.stats
	f.Commentf("Generated by kcedar generate: %d policies from %d requests (%d allowed, %d forbidden).", n, s.Requests, s.Allowed, s.Forbidden)
	if g.existing != nil {
		f.Commentf("%d allowed requests are allowed by the existing policies already: nothing generated for them.", s.AlreadyAllowed)
		f.Commentf("%d allowed requests are allowed by the existing policies on conditions: nothing generated for them, and no policy allows them without the conditions.", s.ConditionallyAllowed)
	}
	if g.rbac != nil {
		f.Commentf("%d allowed requests are allowed by %s: nothing generated for them (--include-rbac-allowed includes them).", s.AllowedByRBAC, g.opts.RBACSource)
	}
	g.notSeenHeader(f)
	classes := make([]string, 0, len(s.System))
	for c := range s.System {
		classes = append(classes, c)
	}
	slices.Sort(classes)
	f.Comment("Left out, system identities (--include-system includes them but the first):")
	f.Comment("  " + SystemMasters + ": not read (kube-apiserver allows them before any webhook)")
	for _, c := range classes {
		f.Commentf("  %s: %d requests", c, s.System[c])
	}
	if o.Conflicting > 0 {
		f.Commentf("Not granted: %d allowed requests whose permission the same subject was also forbidden.", o.Conflicting)
	}
	if o.KeptNames > 0 {
		f.Commentf("Names kept listed for %d grants: every name would allow a logged forbidden request.", o.KeptNames)
	}
	if o.PerMember > 0 {
		f.Commentf("%d permissions written for a member, not its group: for the group they would allow a logged forbidden request.", o.PerMember)
	}
	if o.Withheld > 0 {
		f.Commentf("Not granted: %d allowed requests whose policy would allow a logged forbidden request, or one the existing policies allow only on conditions.", o.Withheld)
	}
	if o.Generalized > 0 {
		f.Commentf("Names generalized in %d grants (a generated or per-user part; within the grant's namespace): each policy's comment says which.", o.Generalized)
	}
	if o.KeptLiteral > 0 {
		f.Commentf("Names kept as requested for %d grants: generalized, they would allow a logged forbidden request.", o.KeptLiteral)
	}
	if o.Unwritable > 0 {
		f.Commentf("Not granted: %d allowed requests naming text that is not valid UTF-8, which no Cedar string holds exactly.", o.Unwritable)
	}
}

// notSeenHeader writes what kcedar never sees, by why, most first.
func (g *Generator) notSeenHeader(f *cedarlex.File) {
	if len(g.stats.NotSeen) == 0 {
		return
	}
	whys := make([]string, 0, len(g.stats.NotSeen))
	for why := range g.stats.NotSeen {
		whys = append(whys, why)
	}
	slices.SortFunc(whys, func(a, b string) int {
		return cmp.Or(cmp.Compare(g.stats.NotSeen[b], g.stats.NotSeen[a]), cmp.Compare(a, b))
	})
	f.Comment("Left out, kcedar never sees them:")
	for _, why := range whys {
		f.Commentf("  %d requests: %s", g.stats.NotSeen[why], why)
	}
}

// boundedBy is the one namespace p grants in, when it is a valid
// namespace name and p is not on the Namespace object itself (which a
// NamespacedCedarPolicy never reaches: cedarlang.NamespaceGuard); "" if
// there is none.
func boundedBy(p *policy) string {
	if p.entity == string(schemagen.NonResourceURLType) || (p.group == "" && p.resource == "namespaces") ||
		len(p.namespaces) != 1 || len(validation.IsDNS1123Label(p.namespaces[0])) > 0 {
		return ""
	}
	return p.namespaces[0]
}
