package generate

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/format"
	"github.com/kcedar/kcedar/internal/engine"
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
// none does.
func (g *Generator) Policies() (*Result, error) {
	t := &tightening{exact: map[grantKey]bool{}, split: map[grantKey]bool{}, withheld: map[grantKey]bool{}}
	for range maxRounds {
		grants, outcome := g.grants(t)
		ps := g.merge(grants, t, &outcome)
		assignIDs(ps)
		// Checked as enforced: an audit policy never allows.
		text := g.render(ps, false)
		bad, err := g.allowsForbidden(text, ps)
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

// render is the policies' text, unformatted; audit annotates them
// @enforcement("audit").
func (g *Generator) render(ps []*policy, audit bool) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.cedar(g.schema, audit))
	}
	return b.String()
}

// allowsForbidden decides a request of every logged forbidden permission
// with the policies text and returns the policies that allow one.
func (g *Generator) allowsForbidden(text string, ps []*policy) ([]*policy, error) {
	if len(ps) == 0 || len(g.forbiddenReqs) == 0 {
		return nil, nil
	}
	parsed, err := cedarlang.ParsePolicies("generated", []byte(text))
	if err != nil {
		return nil, fmt.Errorf("the generated policies do not parse (a bug in kcedar generate): %w", err)
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
			if p := byID[cp.ID]; p != nil {
				bad[p.id] = p
			}
		}
	}
	out := make([]*policy, 0, len(bad))
	for _, p := range bad {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out, nil
}

// result lays the policies out: the header and all, and per subject.
func (g *Generator) result(ps []*policy, outcome Outcome) (*Result, error) {
	res := &Result{Count: len(ps), Stats: g.stats, Outcome: outcome}
	var all strings.Builder
	all.WriteString(g.header(len(ps), outcome))
	for i := 0; i < len(ps); {
		j := i
		for j < len(ps) && ps[j].subject == ps[i].subject {
			j++
		}
		text := g.render(ps[i:j], g.opts.Audit)
		all.WriteString("\n" + text)
		laid, err := format.Source("generated", []byte(text))
		if err != nil {
			return nil, err
		}
		res.Subjects = append(res.Subjects, SubjectPolicies{Slug: ps[i].subject.slug(), Text: laid.Text, Namespace: confinedTo(ps[i:j])})
		i = j
	}
	laid, err := format.Source("generated", []byte(all.String()))
	if err != nil {
		return nil, err
	}
	res.Text = laid.Text
	return res, nil
}

// header is the comment before the policies: what they were generated
// from and what they leave out.
func (g *Generator) header(n int, o Outcome) string {
	s := g.stats
	var b strings.Builder
	fmt.Fprintf(&b, "// Generated by kcedar generate: %d policies from %d requests (%d allowed, %d forbidden).\n", n, s.Requests, s.Allowed, s.Forbidden)
	if g.existing != nil {
		fmt.Fprintf(&b, "// %d allowed requests are allowed by the existing policies already: nothing generated for them.\n", s.AlreadyAllowed)
	}
	classes := make([]string, 0, len(s.System))
	for c := range s.System {
		classes = append(classes, c)
	}
	slices.Sort(classes)
	b.WriteString("// Left out, system identities (--include-system includes them but the first):\n")
	b.WriteString("//   " + SystemMasters + ": not read (kube-apiserver allows them before any webhook)\n")
	for _, c := range classes {
		fmt.Fprintf(&b, "//   %s: %d requests\n", c, s.System[c])
	}
	if o.Conflicting > 0 {
		fmt.Fprintf(&b, "// Not granted: %d allowed requests whose permission the same subject was also forbidden.\n", o.Conflicting)
	}
	if o.KeptNames > 0 {
		fmt.Fprintf(&b, "// Names kept listed for %d grants: every name would allow a logged forbidden request.\n", o.KeptNames)
	}
	if o.PerMember > 0 {
		fmt.Fprintf(&b, "// %d permissions written for a member, not its group: for the group they would allow a logged forbidden request.\n", o.PerMember)
	}
	if o.Withheld > 0 {
		fmt.Fprintf(&b, "// Not granted: %d allowed requests whose policy would allow a logged forbidden request.\n", o.Withheld)
	}
	return b.String()
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
