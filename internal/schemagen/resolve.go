package schemagen

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Resolved is a resource argument resolved against the schema, as kubectl
// resolves `kubectl get <arg>`.
type Resolved struct {
	*Resource
	// Subresource is the requested subresource: Key.Subresource, or for a
	// resource with AnySubresource (userextras) the free-form key.
	Subresource string
	// Version is the resource's preferred version ("" when unknown).
	Version string
	// Others are other resources the name also matched, less preferred
	// ("events.events.k8s.io"): kubectl picks the same one.
	Others []ResourceKey
}

// GroupVersionResource renders the resolved resource as kubectl prints it:
// "apps/v1 deployments/scale" ("v1 pods" for the core group).
func (r *Resolved) GroupVersionResource() string {
	gv := r.Version
	if r.Key.Group != "" {
		gv = r.Key.Group + "/" + r.Version
		if r.Version == "" {
			gv = r.Key.Group
		}
	}
	res := r.Key.Resource
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	if gv == "" {
		return res
	}
	return gv + " " + res
}

// match ranks how a name matched a resource: lower is better.
const (
	matchPlural = iota
	matchSingular
	matchShort
	matchKind
)

// ResolveResource resolves a kubectl-style resource argument: a plural
// (pods), singular (pod), short name (po) or kind (Pod), optionally
// qualified by a group (deployments.apps) or version and group
// (deployments.v1.apps), optionally followed by /subresource (pods/exec,
// deploy/scale). apiGroup, when not empty, restricts the group ("core" or
// "" for the core group is written "core" here; "" means any group). Names
// compare case-insensitively. When several groups have the name, the core
// group wins, then Kubernetes' own groups, then the others by name (see
// Resolved.Others). An unknown resource or subresource is an error with a
// "did you mean" hint.
func (s *Schema) ResolveResource(arg, apiGroup string) (*Resolved, error) {
	arg = strings.TrimSpace(arg)
	if arg == "" {
		return nil, fmt.Errorf("no resource given")
	}
	base, sub, hasSub := strings.Cut(arg, "/")
	if hasSub && (sub == "" || strings.Contains(sub, "/")) && !s.anySubresource(base) {
		return nil, fmt.Errorf("resource %q: want <resource> or <resource>/<subresource>", arg)
	}
	cands := s.resolveCandidates(base, groupFilter(apiGroup))
	if len(cands) == 0 {
		return nil, s.unknownResource(base, apiGroup)
	}
	sortCandidates(cands)
	best := cands[0]
	out := &Resolved{Resource: best.r, Version: best.version}
	for _, c := range cands[1:] {
		out.Others = append(out.Others, c.r.Key)
	}
	if !hasSub {
		return out, nil
	}
	return s.resolveSubresource(out, base, sub)
}

// candidate is a resource a name matched, how well (rank, a match constant)
// and in which version.
type candidate struct {
	r       *Resource
	rank    int
	version string
}

// groupFilter returns the test for the groups the apiGroup argument of
// ResolveResource allows: any group for "", the core group for "core".
func groupFilter(apiGroup string) func(group string) bool {
	if apiGroup == "" {
		return func(string) bool { return true }
	}
	want := apiGroup
	if want == "core" {
		want = ""
	}
	return func(g string) bool { return g == want }
}

// resolveCandidates finds the resources base names, trying kubectl's readings
// of "a.b.c" in turn until one matches: resource a.b.c; resource a, version
// b, group c; resource a, group b.c.
func (s *Schema) resolveCandidates(base string, inGroup func(string) bool) []candidate {
	cands := s.matchResources(base, "*", "", inGroup)
	if first, rest, ok := strings.Cut(base, "."); ok && len(cands) == 0 {
		if v, g, ok := strings.Cut(rest, "."); ok && looksLikeVersion(v) {
			cands = s.matchResources(first, g, v, inGroup)
		}
		if len(cands) == 0 {
			cands = s.matchResources(first, rest, "", inGroup)
		}
	}
	return cands
}

// matchResources lists the resources (not subresources) that name matches, in
// group ("*": any) and, when version is not empty, serving that version.
func (s *Schema) matchResources(name, group, version string, inGroup func(string) bool) []candidate {
	lname := strings.ToLower(name)
	var cands []candidate
	for _, k := range s.SortedResourceKeys() {
		r := s.Resources[k]
		if k.Subresource != "" || !inGroup(k.Group) {
			continue
		}
		if group != "*" && k.Group != group {
			continue
		}
		if version != "" && r.Names.Version != "" && !r.servesVersion(version) {
			continue
		}
		if rank := matchRank(r, lname); rank >= 0 {
			v := version
			if v == "" {
				v = r.Names.Version
			}
			cands = append(cands, candidate{r: r, rank: rank, version: v})
		}
	}
	return cands
}

// matchRank ranks how the lower-cased name lname matches r: a match
// constant, or -1 when it does not.
func matchRank(r *Resource, lname string) int {
	switch {
	case strings.ToLower(r.Key.Resource) == lname:
		return matchPlural
	case r.Names.Singular != "" && strings.ToLower(r.Names.Singular) == lname:
		return matchSingular
	case slices.ContainsFunc(r.Names.ShortNames, func(s string) bool { return strings.ToLower(s) == lname }):
		return matchShort
	case r.Names.Kind != "" && strings.ToLower(r.Names.Kind) == lname:
		return matchKind
	}
	return -1
}

// sortCandidates orders candidates best first: by rank, then group priority,
// then group name (stable, so otherwise in schema order).
func sortCandidates(cands []candidate) {
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		if pa, pb := groupPriority(a.r.Key.Group), groupPriority(b.r.Key.Group); pa != pb {
			return pa < pb
		}
		return a.r.Key.Group < b.r.Key.Group
	})
}

// resolveSubresource narrows out (the resolved resource base) to its
// subresource sub: exactly, through AnySubresource, or case-insensitively.
// An unknown subresource is an error listing those the resource has.
func (s *Schema) resolveSubresource(out *Resolved, base, sub string) (*Resolved, error) {
	key := out.Key
	if r, ok := s.Lookup(key.Group, key.Resource, sub); ok {
		out.Resource = r
		out.Subresource = sub
		if r.Names.Version != "" && out.Version == "" {
			out.Version = r.Names.Version
		}
		return out, nil
	}
	var subs []string
	for _, k := range s.SortedResourceKeys() {
		if k.Group == key.Group && k.Resource == key.Resource && k.Subresource != "" {
			if strings.EqualFold(k.Subresource, sub) {
				out.Resource = s.Resources[k]
				out.Subresource = k.Subresource
				return out, nil
			}
			subs = append(subs, k.Subresource)
		}
	}
	what := key.Resource
	if key.Group != "" {
		what += "." + key.Group
	}
	if len(subs) == 0 {
		return nil, fmt.Errorf("%s has no subresources (asked for %q)", what, sub)
	}
	msg := fmt.Sprintf("%s has no subresource %q", what, sub)
	if m := Closest(sub, subs); m != "" {
		msg += fmt.Sprintf(" (did you mean %s/%s?)", base, m)
	}
	return nil, fmt.Errorf("%s; it has: %s", msg, strings.Join(subs, ", "))
}

// anySubresource reports whether base names a resource whose subresource is
// free-form (userextras/<key>, which may contain "/").
func (s *Schema) anySubresource(base string) bool {
	name, _, _ := strings.Cut(base, ".")
	for _, r := range s.Resources {
		if r.AnySubresource && (strings.EqualFold(r.Key.Resource, base) || strings.EqualFold(r.Key.Resource, name)) {
			return true
		}
	}
	return false
}

func (r *Resource) servesVersion(v string) bool {
	if r.Names.Version == v {
		return true
	}
	_, ok := r.Versions[v]
	return ok
}

func looksLikeVersion(v string) bool {
	if len(v) < 2 || v[0] != 'v' || v[1] < '0' || v[1] > '9' {
		return false
	}
	return true
}

// groupPriority orders groups as kubectl's discovery does in practice: the
// core group, then Kubernetes' own groups, then the others.
func groupPriority(g string) int {
	switch {
	case g == "":
		return 0
	case !strings.Contains(g, ".") || strings.HasSuffix(g, ".k8s.io"):
		return 1
	}
	return 2
}

func (s *Schema) unknownResource(base, apiGroup string) error {
	var names []string
	for _, k := range s.SortedResourceKeys() {
		r := s.Resources[k]
		if k.Subresource != "" {
			continue
		}
		names = append(names, k.Resource)
		if r.Names.Singular != "" {
			names = append(names, r.Names.Singular)
		}
		names = append(names, r.Names.ShortNames...)
		if r.Names.Kind != "" {
			names = append(names, r.Names.Kind)
		}
	}
	where := "the schema"
	if apiGroup != "" {
		where = fmt.Sprintf("the schema (group %q)", apiGroup)
	}
	msg := fmt.Sprintf("resource %q is not in %s", base, where)
	name, _, _ := strings.Cut(base, ".")
	if m := Closest(name, names); m != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", m)
	}
	return fmt.Errorf("%s (--raw sends it literally)", msg)
}

// CheckVerb reports an error, with a "did you mean" hint, for a verb the
// schema does not declare, and for a declared verb that r (nil: any
// resource) does not support. "*" is always accepted.
func (s *Schema) CheckVerb(verb string, r *Resource) error {
	if verb == AllVerbs {
		return nil
	}
	if !slices.Contains(s.Verbs, verb) {
		msg := fmt.Sprintf("verb %q is not a verb the schema declares", verb)
		if m := Closest(verb, s.Verbs); m != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", m)
		}
		return fmt.Errorf("%s; verbs: %s", msg, strings.Join(s.Verbs, ", "))
	}
	if r != nil && len(r.Verbs) > 0 && !slices.Contains(r.Verbs, verb) {
		return fmt.Errorf("%s does not support the verb %q (discovery lists: %s)", r.EntityType, verb, strings.Join(r.Verbs, ", "))
	}
	return nil
}

// Closest returns the candidate nearest to word by edit distance
// (case-insensitive), or "" when none is near enough to be a plausible typo:
// at most 2 edits, and no more than half of word's length. Ties go to the
// first candidate (list the preferred spellings first).
func Closest(word string, candidates []string) string {
	w := strings.ToLower(word)
	best, bestD := "", -1
	for _, c := range candidates {
		d := editDistance(w, strings.ToLower(c))
		if d == 0 {
			return c
		}
		if bestD < 0 || d < bestD { // ties: the first candidate
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > 2 || 2*bestD > len(w) {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance (Levenshtein plus
// transpositions of adjacent characters).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
