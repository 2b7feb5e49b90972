package residual

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/schemagen"
)

// OutcomeCache memoizes outcomes that needed partial evaluation (open values
// or conditions), keyed by the policy set, the schema and every request
// attribute, so repeated requests (a controller creating pods in a
// namespace) skip it. A reload makes a new policy set, so stale entries are
// never hit; the cache is bounded and simply emptied when full.
type OutcomeCache struct {
	mu      sync.Mutex
	entries map[cacheKey]Outcome
	max     int
	// residuals memoizes each policy's residual by the request values it
	// depends on, so different requests share them.
	residuals residualMemo
}

type cacheKey struct {
	policies *cedar.PolicySet
	schema   *schemagen.Schema
	request  string
}

// NewOutcomeCache holds up to max outcomes.
func NewOutcomeCache(max int) *OutcomeCache {
	return &OutcomeCache{entries: map[cacheKey]Outcome{}, max: max, residuals: residualMemo{entries: map[memoEntryKey]*memoEntry{}, max: max}}
}

func (c *OutcomeCache) get(k cacheKey) (Outcome, bool) {
	c.mu.Lock()
	o, ok := c.entries[k]
	c.mu.Unlock()
	return o, ok
}

func (c *OutcomeCache) put(k cacheKey, o Outcome) {
	c.mu.Lock()
	if len(c.entries) >= c.max {
		clear(c.entries)
	}
	c.entries[k] = o
	c.mu.Unlock()
}

// requestKey encodes every attribute a decision depends on.
func requestKey(req *cedar.Request) string {
	var b strings.Builder
	w := func(s string) {
		b.WriteString(s)
		b.WriteByte(0)
	}
	w(req.User.Name)
	w(req.User.UID)
	for _, g := range req.User.Groups {
		w(g)
	}
	b.WriteByte(1)
	for _, k := range slices.Sorted(maps.Keys(req.User.Extra)) {
		w(k)
		for _, v := range req.User.Extra[k] {
			w(v)
		}
		b.WriteByte(1)
	}
	b.WriteByte(2)
	if req.ResourceRequest {
		for _, s := range []string{"r", req.Verb, req.APIGroup, req.Resource, req.Subresource, req.Namespace, req.Name} {
			w(s)
		}
	} else {
		w("n")
		w(req.Verb)
		w(req.Path)
	}
	return b.String()
}
