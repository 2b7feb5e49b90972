package cedarlang

import (
	"math"
	"slices"
	"sync"
)

// Cursor is one request's candidates (Candidates), split the way a decision
// reads them:
//
//   - Eager: the forbids and audit-mode policies that may match, in policy
//     order. A decision evaluates each of them: any forbid may deny, and
//     every audit policy is reported on.
//   - the enforced permits, which Next yields one at a time, in policy
//     order. A decision that stops at the first satisfied permit reads no
//     further, so its cost does not grow with the number of permits a key
//     holds: Next merges the index's sorted postings in place, checking each
//     policy's constraints only when it is reached.
//
// A Cursor is used by one goroutine.
type Cursor struct {
	// Eager, eagerIDs and singleBuf keep their storage when a Cursor is
	// released and reused.
	Eager []*Policy

	eagerIDs []int32
	// eagerRead: the ids the lookup read to find Eager, before checking
	// their constraints (duplicates included).
	eagerRead int
	ps        *PolicySet
	s         lookupState
	lists     [][]int32 // sorted postings not yet read
	last      int32     // the last policy yielded or skipped
	next      int       // without an index: the next position in ps.Policies
	peeked    *Policy
	hasPeek   bool
	// skipResidualOnly (CandidateQuery.SkipResidualOnly) leaves out the
	// permits that can leave only a residual for this request: those that
	// constrain (outside a disjunction) a value of the resource (namespace,
	// name, apiGroup, resource, path) the request leaves open. Such a permit
	// needs that value to match, so partial evaluation cannot find it satisfied
	// outright, and where nothing evaluates residuals it cannot change the
	// decision. Nor is any permit read that only an open value finds (its key
	// is on the open value): one whose disjunction may hold otherwise is found
	// by the key of that alternative. This keeps a list or watch across names
	// or namespaces from costing what the policies keyed on them number.
	skipResidualOnly bool

	groupBuf  [8]uint64
	listBuf   [16][]int32
	singleBuf []int32
}

// cursors are released Cursors, reused: a decision looks one up per
// request, and a Cursor is a kilobyte.
var cursors = sync.Pool{New: func() any { return new(Cursor) }}

// newCursor is an empty Cursor of ps, from the pool.
func newCursor(ps *PolicySet) *Cursor {
	c := cursors.Get().(*Cursor)
	*c = Cursor{ps: ps, last: -1, Eager: c.Eager[:0], eagerIDs: c.eagerIDs[:0], singleBuf: c.singleBuf[:0]}
	return c
}

// Release returns c for reuse: neither c nor its Eager slice may be used
// after.
func (c *Cursor) Release() {
	if cap(c.Eager) > 4096 || cap(c.eagerIDs) > 4096 || cap(c.singleBuf) > 4096 {
		return // grown by a rare request: let it go
	}
	// Keep nothing of the set alive: no policy, no posting.
	clear(c.Eager[:cap(c.Eager)])
	c.ps, c.peeked, c.lists = nil, nil, nil
	clear(c.listBuf[:])
	cursors.Put(c)
}

// Lookup returns the candidates of the request q describes as a Cursor.
// Release it when done.
func (ps *PolicySet) Lookup(q CandidateQuery) *Cursor {
	c := newCursor(ps)
	if ps.index == nil {
		for _, p := range ps.Policies {
			if !lazyPolicy(p) {
				c.Eager = append(c.Eager, p)
			}
		}
		return c
	}
	ix := ps.index
	c.s.multi[dGroup] = c.groupBuf[:0]
	ix.describe(&c.s, q)
	lists, singles := ix.gather(&c.s, q.Verb, 1<<partForbids, c.listBuf[:0], c.eagerIDs)
	// Audit permits that can only leave a residual change no folded
	// decision: no finding. Those only an open value finds are not read,
	// the others are left out below.
	c.s.skipOpen = q.SkipResidualOnly
	lists, singles = ix.gather(&c.s, q.Verb, 1<<partAuditPermits, lists, singles)
	c.eagerIDs, c.eagerRead = ix.materialize(&c.s, false, lists, singles)
	if q.SkipResidualOnly && c.s.openMask&resourceDims != 0 {
		c.eagerIDs = slices.DeleteFunc(c.eagerIDs, func(i int32) bool {
			return ix.kinds[i]&kindForbid == 0 && ix.needsValue[i]&c.s.openMask != 0
		})
	}
	for _, i := range c.eagerIDs {
		c.Eager = append(c.Eager, ps.Policies[i])
	}
	if q.SkipResidualOnly {
		c.skipResidualOnly = true
	}
	lists, singles = ix.gather(&c.s, q.Verb, lazyPartitions, lists[:0], c.singleBuf)
	c.singleBuf = singles
	c.s.skipOpen = false
	if len(singles) > 0 {
		slices.Sort(singles)
		lists = append(lists, singles)
	}
	c.lists = lists
	return c
}

// Next returns the next enforced permit that may match, in policy order, or
// nil when there is none.
func (c *Cursor) Next() *Policy {
	if c.hasPeek {
		c.hasPeek = false
		return c.peeked
	}
	if c.ps.index == nil {
		for c.next < len(c.ps.Policies) {
			p := c.ps.Policies[c.next]
			c.next++
			if lazyPolicy(p) {
				return p
			}
		}
		return nil
	}
	if i, ok := c.nextID(); ok {
		return c.ps.Policies[i]
	}
	return nil
}

// nextID is Next for an indexed set, as a position in ps.Policies.
func (c *Cursor) nextID() (int32, bool) {
	for {
		i, ok := c.pop()
		if !ok {
			return 0, false
		}
		if c.skipResidualOnly && c.ps.index.needsValue[i]&c.s.openMask != 0 {
			continue
		}
		// A fingerprint shared with a key of the other partition may bring
		// its postings: they are not this partition's.
		if ix := c.ps.index; ix.kinds[i]&kindLazy != 0 && ix.holds(i, &c.s) {
			return i, true
		}
	}
}

// pop takes the least policy at the head of any list (from every list that
// holds it), skipping any already taken.
func (c *Cursor) pop() (int32, bool) {
	for {
		least := int32(math.MaxInt32)
		for _, l := range c.lists {
			if len(l) > 0 && l[0] < least {
				least = l[0]
			}
		}
		if least == math.MaxInt32 {
			return 0, false
		}
		for j, l := range c.lists {
			if len(l) > 0 && l[0] == least {
				c.lists[j] = l[1:]
			}
		}
		if least > c.last {
			c.last = least
			return least, true
		}
	}
}

// SkipResidualOnly makes Next leave out, from here on, the permits that can
// only leave a residual for this request (CandidateQuery.SkipResidualOnly):
// for a decision that has all the residuals it can use.
func (c *Cursor) SkipResidualOnly() { c.skipResidualOnly = true }

// HasPermits reports whether Next would return a permit; it does not
// consume it.
func (c *Cursor) HasPermits() bool {
	if !c.hasPeek {
		c.peeked, c.hasPeek = c.Next(), true
	}
	return c.peeked != nil
}

// Empty reports whether the request has no candidate at all.
func (c *Cursor) Empty() bool { return len(c.Eager) == 0 && !c.HasPermits() }

// Rest drains the cursor: every enforced permit Next has not returned yet.
func (c *Cursor) Rest() []*Policy {
	var out []*Policy
	for p := c.Next(); p != nil; p = c.Next() {
		out = append(out, p)
	}
	return out
}
