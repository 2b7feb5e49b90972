package engine

import (
	"sync"
	"sync/atomic"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Engine is the Authorizer of one schema and one policy set (a generation of
// the store). It owns every cache built from that set: decisions, residuals,
// policy analyses and what is derived from residuals (encoded conditions),
// so replacing the engine when the set is reloaded frees them all. An Engine is safe for concurrent use.
type Engine struct {
	schema   *schemagen.Schema
	policies *cedarlang.PolicySet

	// Caches; nil when caching is off.
	decisions *boundedCache[string, Decision]
	residuals *boundedCache[memoEntryKey, *memoEntry]
	derived   *boundedCache[derivedKey, derivedEntry]
	// namespaces fills namespaceObject (nil: always unknown); nsObjects
	// caches converted Namespace objects by name and resourceVersion.
	namespaces entities.NamespaceLookup
	nsObjects  *boundedCache[string, *nsConverted]
	// inputs analyses each policy once (what its residual depends on).
	inputs sync.Map // *cedarlang.Policy -> *policyInputs, for policies of this set only
	// nsReaders are the set's policies that read namespaceObject, found at
	// load (nil: none).
	nsReaders map[*cedarlang.Policy]bool
	// nsReadsAt: the same by position in the set, for the next set's engine.
	nsReadsAt []bool
	// permitReadsNamespace: an enforced permit is among nsReaders.
	permitReadsNamespace bool
	// principals: users as Cedar data (nil: caching off).
	principals *boundedCache[string, types.Entity]
	// shadow: every policy is in audit mode (EngineOptions.Shadow).
	shadow bool
	// encodedOnly: EngineOptions.EncodedOnly.
	encodedOnly Encoder
}

var _ Interface = (*Engine)(nil)

// EngineOptions configure an Engine.
type EngineOptions struct {
	// CacheSize bounds each of the engine's caches (decisions, residuals,
	// encoded conditions); 0 turns caching off.
	CacheSize int
	// Namespaces looks up the Namespace objects that fill namespaceObject,
	// for SubjectAccessReviews, the conditions callback and admission alike.
	// nil: namespaceObject is always unknown.
	Namespaces entities.NamespaceLookup
	// Shadow evaluates every policy in audit mode (`kcedar serve
	// --shadow`): every decision is NoOpinion, and its audit findings say
	// what the policies would have decided.
	Shadow bool
	// EncodedOnly, when set, is the encoder every conditional decision is
	// made for (a server's or an embedder's Encode), which answers Deny past
	// wire.MaxConditions deny conditions and drops the allow conditions past
	// that many in all, and those that do not encode.
	// Evaluation then stops where the encoded answer can no longer change:
	// after one deny condition too many, and, once the allow conditions fill
	// the rest, it reads only the permits that may be satisfied outright.
	// Encode gives exactly what it gives for the full decision, but the
	// decision holds fewer residuals, so tools that list them (explain,
	// diff) leave this off.
	EncodedOnly Encoder
}

// nsObjectCacheSize bounds the converted-namespace cache (kept even with
// caching off: a conversion per request would be the cost of a decision).
func nsObjectCacheSize(n int) int { return max(n, 1024) }

// DefaultCacheSize is the cache bound the server uses.
const DefaultCacheSize = 16384

// NewEngine returns the authorizer of schema and policies.
func NewEngine(schema *schemagen.Schema, policies *cedarlang.PolicySet, opts EngineOptions) *Engine {
	return newEngineAfter(nil, schema, policies, opts)
}

// newEngineAfter is NewEngine, reusing the policy analyses of prev (the
// engine of the set serving before; nil: none) for the policies the sets
// share.
func newEngineAfter(prev *Engine, schema *schemagen.Schema, policies *cedarlang.PolicySet, opts EngineOptions) *Engine {
	e := &Engine{schema: schema, policies: policies,
		namespaces: opts.Namespaces, shadow: opts.Shadow, encodedOnly: opts.EncodedOnly, nsObjects: newBoundedCache[string, *nsConverted](nsObjectCacheSize(opts.CacheSize))}
	e.nsReaders, e.nsReadsAt = namespaceReadersAfter(prev, policies)
	for p := range e.nsReaders {
		e.permitReadsNamespace = e.permitReadsNamespace || p.Effect == types.Permit && !e.isAudit(p)
	}
	if opts.CacheSize > 0 {
		e.decisions = newBoundedCache[string, Decision](opts.CacheSize)
		e.residuals = newBoundedCache[memoEntryKey, *memoEntry](opts.CacheSize)
		e.derived = newBoundedCache[derivedKey, derivedEntry](opts.CacheSize)
		e.principals = newBoundedCache[string, types.Entity](opts.CacheSize)
	}
	return e
}

// Schema and Policies are what the engine decides with.
func (e *Engine) Schema() *schemagen.Schema      { return e.schema }
func (e *Engine) Policies() *cedarlang.PolicySet { return e.policies }
func (e *Engine) Generation() uint64             { return e.policies.Generation }

// Namespaces is the lookup that fills namespaceObject
// (EngineOptions.Namespaces; nil: always unknown).
func (e *Engine) Namespaces() entities.NamespaceLookup { return e.namespaces }

func (e *Engine) CacheStats() (entries, evictions int64) {
	for _, s := range []cacheStats{e.decisions.stats(), e.residuals.stats(), e.derived.stats()} {
		entries += s.entries
		evictions += s.evictions
	}
	return entries, evictions
}

// uncached is an engine without caches on e's schema and policy set,
// for access reviews: a review asks thousands of questions once (every verb
// x resource for a rules review), which would only evict the decisions the
// SubjectAccessReview path reuses.
func (e *Engine) uncached() *Engine {
	if e.decisions == nil {
		return e
	}
	return &Engine{schema: e.schema, policies: e.policies, namespaces: e.namespaces, shadow: e.shadow,
		nsObjects: e.nsObjects, nsReaders: e.nsReaders, nsReadsAt: e.nsReadsAt, permitReadsNamespace: e.permitReadsNamespace}
}

// boundedCache is a map with a size limit: when full it is emptied (entries
// are cheap to recompute; emptying is O(1) amortized and never grows).
type boundedCache[K comparable, V any] struct {
	mu        sync.Mutex
	m         map[K]V
	max       int
	evictions atomic.Int64
}

type cacheStats struct{ entries, evictions int64 }

func newBoundedCache[K comparable, V any](max int) *boundedCache[K, V] {
	return &boundedCache[K, V]{m: make(map[K]V), max: max}
}

func (c *boundedCache[K, V]) get(k K) (V, bool) {
	var zero V
	if c == nil {
		return zero, false
	}
	c.mu.Lock()
	v, ok := c.m[k]
	c.mu.Unlock()
	return v, ok
}

func (c *boundedCache[K, V]) put(k K, v V) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if len(c.m) >= c.max {
		c.evictions.Add(int64(len(c.m)))
		clear(c.m)
	}
	c.m[k] = v
	c.mu.Unlock()
}

func (c *boundedCache[K, V]) stats() cacheStats {
	if c == nil {
		return cacheStats{}
	}
	c.mu.Lock()
	n := len(c.m)
	c.mu.Unlock()
	return cacheStats{entries: int64(n), evictions: c.evictions.Load()}
}
