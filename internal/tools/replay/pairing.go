package replay

// DefaultMaxOpenRequests bounds the requests held between their
// ResponseStarted event and their ResponseComplete.
const DefaultMaxOpenRequests = 100000

// earlyPerHeld is how many auditIDs of requests decided early (at their
// ResponseStarted, for want of room) are remembered per request held.
const earlyPerHeld = 4

// folded is one line's result, where it came from.
type folded struct {
	input string
	no    int
	res   result
}

// pairing decides each request once when it has several stages that
// record a decision: a long-running request (watch, exec, attach,
// port-forward) logs ResponseStarted when its response begins and
// ResponseComplete when it ends, or never if the log ends first. A
// ResponseStarted is held until its ResponseComplete (or Panic) comes, which
// is then the one decided; one still held at the end is decided alone.
// Memory is bounded: past max held, the oldest is decided alone and its
// auditID remembered (up to earlyPerHeld times max auditIDs, the oldest
// forgotten first) so its ResponseComplete is not decided again.
type pairing struct {
	max     int
	started map[string]folded
	queue   []string // auditIDs held, oldest first (some already paired)
	early   map[string]bool
	earlyQ  []string // auditIDs of early, oldest first (some already paired)
}

func newPairing(max int) *pairing {
	return &pairing{max: max, started: map[string]folded{}, early: map[string]bool{}}
}

// pairable reports whether r is a request's result that pairing holds or
// pairs: an audit event with an auditID, of a stage that records a
// decision.
func pairable(r result) bool {
	if r.kind <= kindForeign || r.auditID == "" {
		return false
	}
	switch r.stage {
	case stageResponseStarted, stageResponseComplete, stagePanic:
		return true
	}
	return false
}

// admit takes one line's result and returns the results to count now, in
// order: none (held), itself, or a held ResponseStarted (now a skip) and
// itself.
func (p *pairing) admit(f folded) []folded {
	if !pairable(f.res) {
		return []folded{f}
	}
	id := f.res.auditID
	if f.res.stage == stageResponseStarted {
		if _, held := p.started[id]; held || p.early[id] {
			return []folded{skippedAs(f, "stage ResponseStarted, a second one of the same auditID")}
		}
		p.started[id] = f
		p.queue = append(p.queue, id)
		return p.evict()
	}
	if held, ok := p.started[id]; ok {
		delete(p.started, id)
		return []folded{skippedAs(held, "stage ResponseStarted, paired with the "+f.res.stage+" of the same auditID (decided there)"), f}
	}
	if p.early[id] {
		delete(p.early, id)
		return []folded{skippedAs(f, "stage "+f.res.stage+" of a request decided at its ResponseStarted (too many requests open at once to hold it)")}
	}
	return []folded{f}
}

// evict releases the oldest held requests past max, to be decided alone.
func (p *pairing) evict() []folded {
	var out []folded
	for len(p.started) > p.max && len(p.queue) > 0 {
		id := p.queue[0]
		p.queue = p.queue[1:]
		f, ok := p.started[id]
		if !ok {
			continue
		}
		delete(p.started, id)
		p.early[id] = true
		p.earlyQ = append(p.earlyQ, id)
		out = append(out, f)
	}
	for len(p.early) > earlyPerHeld*p.max && len(p.earlyQ) > 0 {
		delete(p.early, p.earlyQ[0])
		p.earlyQ = p.earlyQ[1:]
	}
	p.queue = compact(p.queue, func(id string) bool { _, ok := p.started[id]; return ok }, p.max)
	p.earlyQ = compact(p.earlyQ, func(id string) bool { return p.early[id] }, earlyPerHeld*p.max)
	return out
}

// compact drops the ids no longer held from q once it is twice max long,
// so the queues stay within bounds however many requests pass.
func compact(q []string, held func(string) bool, max int) []string {
	if len(q) <= 2*max+16 {
		return q
	}
	out := make([]string, 0, max+16)
	for _, id := range q {
		if held(id) {
			out = append(out, id)
		}
	}
	return out
}

// drain releases every held request, oldest first, to be decided alone.
func (p *pairing) drain() []folded {
	var out []folded
	for _, id := range p.queue {
		if f, ok := p.started[id]; ok {
			out = append(out, f)
		}
	}
	clear(p.started)
	p.queue = p.queue[:0]
	return out
}

// skippedAs is f counted as skipped, for why.
func skippedAs(f folded, why string) folded {
	f.res = result{kind: kindSkipped, reason: why}
	return f
}
