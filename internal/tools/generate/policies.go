package generate

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/format"
	"github.com/kcedar/kcedar/internal/engine"
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
	// Namespace is the one namespace every policy of the subject is
	// confined to ("" if they are not): a NamespacedCedarPolicy there holds
	// them.
	Namespace string
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
	t := &tightening{exact: map[grantKey]bool{}, split: map[grantKey]bool{}, withheld: map[grantKey]bool{}}
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
		for _, p := range bad {
			t.tighten(p)
		}
	}
	return nil, fmt.Errorf("the policies still allow a forbidden request after %d rounds of tightening (a bug in kcedar generate)", maxRounds)
}

// tighten makes the grants of p stricter by one step.
func (t *tightening) tighten(p *policy) {
	for _, k := range p.keys {
		switch {
		case p.names.any && !p.names.strict && !t.exact[k]:
			t.exact[k] = true
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

// allowsForbidden decides a request of every logged forbidden permission
// with the parsed policies and returns the policies that allow one. A
// policy that allows one but is none of ps (which Verify rules out) is an
// error: every policy of the text is checked, not only those built.
func (g *Generator) allowsForbidden(parsed []*cedarlang.Policy, ps []*policy) ([]*policy, error) {
	if len(parsed) == 0 || len(g.forbiddenReqs) == 0 {
		return nil, nil
	}
	set, err := cedarlang.NewPolicySet(parsed)
	if err != nil {
		return nil, fmt.Errorf("the generated policies do not load (a bug in kcedar generate): %w", err)
	}
	e := engine.NewEngine(g.schema, set, engine.NewCodec(engine.RandomKeyring()), engine.EngineOptions{})
	byID := make(map[string]*policy, len(ps))
	for _, p := range ps {
		byID[p.id] = p
	}
	bad := map[string]*policy{}
	for _, req := range g.forbiddenReqs {
		d := e.Authorize(context.Background(), req)
		if !d.IsAllowed() {
			continue
		}
		for _, cp := range d.Policies() {
			p := byID[cp.ID]
			if p == nil {
				return nil, fmt.Errorf("policy %s of the generated text, which kcedar generate did not build, allows the forbidden request %s (a bug in kcedar generate)",
					cedarlex.Shorten(cp.ID), req)
			}
			bad[p.id] = p
		}
	}
	out := make([]*policy, 0, len(bad))
	for _, p := range bad {
		out = append(out, p)
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
		var one cedarlex.File
		if err := g.render(&one, ps[i:j], g.opts.Audit); err != nil {
			return nil, err
		}
		all.Blank()
		if err := g.render(&all, ps[i:j], g.opts.Audit); err != nil {
			return nil, err
		}
		laid, err := layOut(&one)
		if err != nil {
			return nil, err
		}
		res.Subjects = append(res.Subjects, SubjectPolicies{Slug: ps[i].subject.slug(), Text: laid, Namespace: confinedTo(ps[i:j])})
		i = j
	}
	laid, err := layOut(&all)
	if err != nil {
		return nil, err
	}
	res.Text = laid
	return res, nil
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
	}
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
		f.Commentf("Not granted: %d allowed requests whose policy would allow a logged forbidden request.", o.Withheld)
	}
	if o.Unwritable > 0 {
		f.Commentf("Not granted: %d allowed requests naming text that is not valid UTF-8, which no Cedar string holds exactly.", o.Unwritable)
	}
}

// confinedTo is the one namespace every policy of ps grants in, "" if
// there is none.
func confinedTo(ps []*policy) string {
	ns := ""
	for _, p := range ps {
		if p.entity == string(schemagen.NonResourceURLType) || len(p.namespaces) != 1 || p.namespaces[0] == "" ||
			(ns != "" && p.namespaces[0] != ns) {
			return ""
		}
		ns = p.namespaces[0]
	}
	return ns
}
