package cedarlang

import (
	"fmt"
	"slices"
)

// Internals for the external tests (package cedar_test), which may import
// packages that import cedar (internal/testing/testgen/zoo).
var (
	CheckNestingForTest = checkNesting
	ParseErrorForTest   = parseError
)

// SameSeedSetForTest is NewPolicySet(policies) with like's index seeds, so
// its derived structures compare with a set NewPolicySetFrom(like, ...)
// derived.
func SameSeedSetForTest(like *PolicySet, policies []*Policy) (*PolicySet, error) {
	return newPolicySet(policies, func() *index { return buildIndexSeeded(policies, like.index) })
}

// DerivedForTest: ps's index was derived from another's (deltaIndex).
func DerivedForTest(ps *PolicySet) bool { return ps.index != nil && ps.index.derived }

// IndexDiffForTest compares the structures of got's index that do not
// depend on which constraint keys a policy (which a derived index may pick
// differently): each policy's checks and needed values, the policies of
// each bucket, the verbs. "" when they agree.
func IndexDiffForTest(got, want *PolicySet) string {
	g, w := got.index, want.index
	if len(got.Policies) != len(want.Policies) {
		return fmt.Sprintf("%d policies, want %d", len(got.Policies), len(want.Policies))
	}
	for j := range want.Policies {
		gc, wc := g.cons[g.consAt[j]:g.consAt[j+1]], w.cons[w.consAt[j]:w.consAt[j+1]]
		if !slices.Equal(gc, wc) || g.needsValue[j] != w.needsValue[j] {
			return fmt.Sprintf("policy %d (%s): checks %v needs %b, want %v needs %b", j, want.Policies[j].ID, gc, g.needsValue[j], wc, w.needsValue[j])
		}
	}
	for k, wb := range w.buckets {
		gb := g.buckets[k]
		if gb == nil {
			return fmt.Sprintf("bucket %v missing", k)
		}
		if gm, wm := gb.members(), wb.members(); !slices.Equal(gm, wm) {
			return fmt.Sprintf("bucket %v holds %v, want %v", k, gm, wm)
		}
	}
	for k, gb := range g.buckets {
		if w.buckets[k] == nil && len(gb.members()) > 0 {
			return fmt.Sprintf("bucket %v holds %v, want none", k, gb.members())
		}
	}
	if w.labelKeyed && !g.labelKeyed {
		return "no policy is keyed on a namespace label; a fresh build keys one"
	}
	for _, v := range w.verbs {
		if !slices.Contains(g.verbs, v) {
			return fmt.Sprintf("verb %x missing", v)
		}
	}
	return ""
}

// members is every policy b files, sorted.
func (b *bucket) members() []int32 {
	out := slices.Concat(b.rest, b.keyed)
	slices.Sort(out)
	return out
}

// BreakIndexForTest drops policy j from every bucket of ps's index: a
// broken delta, for checking that the comparisons catch one.
func BreakIndexForTest(ps *PolicySet, j int32) {
	for _, b := range ps.index.buckets {
		b.rest = slices.DeleteFunc(b.rest, func(i int32) bool { return i == j })
		b.keyed = slices.DeleteFunc(b.keyed, func(i int32) bool { return i == j })
	}
}

// TextEndForTest is where p's text ends in its file (0: not known).
func TextEndForTest(p *Policy) int { return p.textEnd }

// EagerReadForTest is how many policy ids c's lookup read to find its
// Eager policies, before checking their constraints.
func EagerReadForTest(c *Cursor) int { return c.eagerRead }
