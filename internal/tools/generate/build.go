package generate

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarlex"
)

// grantKey is one subject's verb on a target in one namespace: the unit a
// policy's name condition is chosen for.
type grantKey struct {
	subject
	target
	verb, namespace string
}

// grant is what a grantKey's requests named: names as requested, and
// names generalized (by pattern text).
type grant struct {
	names    map[string]bool
	patterns map[string]*rulePattern
	unnamed  bool
	ev       evidence
}

// tightening is what the check of the policies against the forbidden
// requests made stricter, per grantKey.
type tightening struct {
	exact    map[grantKey]bool // names listed, never "every name"
	literal  map[grantKey]bool // names as requested, never generalized
	split    map[grantKey]bool // a group's grant written per member instead
	withheld map[grantKey]bool // not written at all
}

// Outcome counts what the policies leave out of the allowed requests.
type Outcome struct {
	// Conflicting are allowed requests of a permission the same subject
	// was also forbidden (the policies changed during the log): not granted.
	Conflicting int `json:"conflicting"`
	// Withheld are allowed requests whose policy would have allowed a
	// logged forbidden request (or, without its conditions, a request the
	// existing policies allow on conditions) however tightened: not
	// granted.
	Withheld int `json:"withheld"`
	// KeptNames are grants whose names stay listed although the names mode
	// would allow every name: that would allow a logged forbidden request.
	KeptNames int `json:"keptNames"`
	// Generalized are grants with names generalized (Generalize);
	// KeptLiteral those whose names stay as requested because a pattern
	// would allow a logged forbidden request.
	Generalized int `json:"generalized"`
	KeptLiteral int `json:"keptLiteral"`
	// PerMember are permissions of a group subject's member written for
	// the member: for the group they would allow a forbidden request.
	PerMember int `json:"perMember"`
	// Unwritable are allowed requests naming text that is not valid UTF-8
	// (a name, path, namespace, user, ... percent-decoded from the URL),
	// which no Cedar string holds exactly: not granted. Skipped says which,
	// sorted (the first 20, then how many more).
	Unwritable int      `json:"unwritable"`
	Skipped    []string `json:"skipped,omitempty"`
}

// grants assigns the allowed permissions to subjects and folds them per
// grantKey, as tightened.
func (g *Generator) grants(t *tightening) (map[grantKey]*grant, Outcome) {
	var out Outcome
	grants := map[grantKey]*grant{}
	skipped := map[string]bool{}
	for up, ev := range g.allowed {
		if why := unwritable(up); why != "" {
			out.Unwritable += ev.count
			skipped[why] = true
			continue
		}
		user := subject{name: up.user, principal: up.principal}
		subj := user
		if up.group != "" {
			grp := subject{isGroup: true, name: up.group}
			gk := grantKey{grp, up.target, up.verb, up.namespace}
			if !g.forbidden[subjectPerm{grp, up.perm}] && !t.split[gk] {
				subj = grp
			} else {
				out.PerMember++
			}
		}
		if !subj.isGroup && g.forbidden[subjectPerm{user, up.perm}] {
			out.Conflicting += ev.count
			continue
		}
		gk := grantKey{subj, up.target, up.verb, up.namespace}
		if t.withheld[gk] {
			out.Withheld += ev.count
			continue
		}
		gr := grants[gk]
		if gr == nil {
			gr = &grant{names: map[string]bool{}, patterns: map[string]*rulePattern{}}
			grants[gk] = gr
		}
		g.addName(gr, gk, up, t)
		gr.ev.merge(ev)
	}
	for why := range skipped {
		out.Skipped = append(out.Skipped, why)
	}
	slices.Sort(out.Skipped)
	if n := len(out.Skipped) - maxSkippedListed; n > 0 {
		out.Skipped = append(out.Skipped[:maxSkippedListed], fmt.Sprintf("and %d more texts that are not valid UTF-8: not granted", n))
	}
	return grants, out
}

// addName adds the name up requested to gr: generalized where the mode,
// the grant (namespaced: a pattern never reaches another namespace) and
// the tightening allow.
func (g *Generator) addName(gr *grant, gk grantKey, up userPerm, t *tightening) {
	switch {
	case up.name == "":
		gr.unnamed = true
		return
	case g.opts.Generalize == GeneralizeAuto && gk.namespace != "" && !t.literal[gk]:
		if pat, ok := generalizeName(up.name, up.user, gk.isGroup); ok {
			key := pat.text()
			if p := gr.patterns[key]; p == nil || up.name < p.example {
				gr.patterns[key] = &rulePattern{namePattern: pat, example: up.name}
			}
			return
		}
	}
	gr.names[up.name] = true
}

// maxSkippedListed bounds the reasons Outcome.Skipped lists one by one.
const maxSkippedListed = 20

// unwritable is why a policy cannot grant up exactly ("" if it can): the
// first of its texts that is not valid UTF-8.
func unwritable(up userPerm) string {
	for _, f := range []struct{ what, text string }{
		{"user", up.user}, {"group subject", up.group}, {"verb", up.verb}, {"API group", up.target.group}, {"resource", up.resource},
		{"subresource", up.subres}, {"path", up.path}, {"namespace", up.namespace}, {"name", up.name},
	} {
		if !utf8.ValidString(f.text) {
			return fmt.Sprintf("allowed requests of user %s: the %s %s is not valid UTF-8, which no Cedar string holds exactly: not granted",
				cedarlex.Shorten(up.user), f.what, cedarlex.Shorten(f.text))
		}
	}
	return ""
}

// forbiddenKeys are the grantKeys of the forbidden permissions.
func (g *Generator) forbiddenKeys() map[grantKey]bool {
	keys := make(map[grantKey]bool, len(g.forbidden))
	for sp := range g.forbidden {
		keys[grantKey{sp.subject, sp.target, sp.verb, sp.namespace}] = true
	}
	return keys
}

// nameRule is how a grant's policy names objects: every name, or the
// listed names and, when unnamed, requests that name no object.
type nameRule struct {
	any   bool
	names []string // sorted
	// patterns are generalized names (sorted by text).
	patterns []rulePattern
	unnamed  bool
	// strict: an unnamed-only grant keeps !resource.named (a forbidden
	// request of the same key names an object).
	strict bool
}

// key is the rule as a comparable string.
func (r nameRule) key() string {
	if r.any {
		return "*"
	}
	var b strings.Builder
	if r.unnamed {
		b.WriteString("-")
	}
	if r.strict {
		b.WriteString("!")
	}
	for _, n := range r.names {
		b.WriteString(strconv.Quote(n))
	}
	for _, p := range r.patterns {
		b.WriteString("~" + strconv.Quote(p.text()))
	}
	return b.String()
}

// byPatternOnly reports whether the rule allows req's name only through
// a pattern: the name is not listed, and a pattern matches it.
func (r nameRule) byPatternOnly(req *entities.Request) bool {
	return !r.any && req.Named() && !slices.Contains(r.names, req.Name) &&
		slices.ContainsFunc(r.patterns, func(p rulePattern) bool { return p.matches(req.Name) })
}

// nameRuleOf chooses a grant's name rule: see Names.
func (g *Generator) nameRuleOf(gk grantKey, gr *grant, t *tightening, forbidden map[grantKey]bool, out *Outcome) nameRule {
	names := make([]string, 0, len(gr.names))
	for n := range gr.names {
		names = append(names, n)
	}
	slices.Sort(names)
	patterns := make([]rulePattern, 0, len(gr.patterns))
	for _, p := range gr.patterns {
		patterns = append(patterns, *p)
	}
	slices.SortFunc(patterns, func(a, b rulePattern) int { return strings.Compare(a.text(), b.text()) })
	names = absorbed(names, patterns)
	if t.literal[gk] {
		out.KeptLiteral++
	}
	widen := g.opts.Names == NamesAny || (g.opts.Names == NamesAuto && len(names)+len(patterns) > g.opts.MaxNames)
	if len(names)+len(patterns) == 0 {
		return nameRule{any: true, strict: forbidden[gk] || t.exact[gk]}
	}
	if widen && !t.exact[gk] && !forbidden[gk] {
		return nameRule{any: true}
	}
	if widen {
		out.KeptNames++
	}
	if len(patterns) > 0 {
		out.Generalized++
	}
	return nameRule{names: names, patterns: patterns, unnamed: gr.unnamed}
}

// policy is one generated permit: a subject's verbs on a target in a set
// of namespaces, with one name rule.
type policy struct {
	subject
	target
	verbs      []string
	namespaces []string // sorted; "" is every namespace (or none)
	names      nameRule
	class      verbClass
	ev         evidence
	keys       []grantKey
	id         string
}

// merge groups the grants into policies: per subject and target, the
// verbs with the same name rule in a namespace, then the namespaces with
// the same verbs and name rule.
func (g *Generator) merge(grants map[grantKey]*grant, t *tightening, out *Outcome) []*policy {
	forbidden := g.forbiddenKeys()
	type byNS struct {
		subject
		target
		namespace, names string
		class            verbClass
	}
	step1 := map[byNS]*policy{}
	for gk, gr := range grants {
		rule := g.nameRuleOf(gk, gr, t, forbidden, out)
		if rule.strict {
			rule.any = false
			rule.unnamed = true
		}
		k := byNS{gk.subject, gk.target, gk.namespace, rule.key(), classOf(g.schema, gk.target, gk.verb)}
		p := step1[k]
		if p == nil {
			p = &policy{subject: gk.subject, target: gk.target, namespaces: []string{gk.namespace}, names: rule, class: k.class}
			step1[k] = p
		}
		p.verbs = append(p.verbs, gk.verb)
		p.keys = append(p.keys, gk)
		p.ev.merge(&gr.ev)
	}
	type byVerbs struct {
		subject
		target
		verbs, names string
		class        verbClass
		// namespace: with SplitNamespaces, a policy's one namespace.
		namespace string
	}
	step2 := map[byVerbs]*policy{}
	for _, p := range step1 {
		slices.Sort(p.verbs)
		k := byVerbs{p.subject, p.target, strings.Join(p.verbs, " "), p.names.key(), p.class, ""}
		if g.opts.SplitNamespaces {
			k.namespace = p.namespaces[0]
		}
		q := step2[k]
		if q == nil {
			step2[k] = p
			continue
		}
		q.namespaces = append(q.namespaces, p.namespaces...)
		q.keys = append(q.keys, p.keys...)
		q.ev.merge(&p.ev)
	}
	ps := make([]*policy, 0, len(step2))
	for _, p := range step2 {
		slices.Sort(p.namespaces)
		ps = append(ps, p)
	}
	sortPolicies(ps)
	return ps
}

// sortPolicies orders policies by subject, target, namespaces and verbs.
func sortPolicies(ps []*policy) {
	slices.SortFunc(ps, func(a, b *policy) int {
		return cmp.Or(
			cmp.Compare(a.subject.slug(), b.subject.slug()),
			cmp.Compare(a.target.slug(), b.target.slug()),
			cmp.Compare(a.entity, b.entity),
			slices.Compare(a.namespaces, b.namespaces),
			slices.Compare(a.verbs, b.verbs),
			cmp.Compare(a.names.key(), b.names.key()),
		)
	})
}
