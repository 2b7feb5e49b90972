package server

import (
	"sync"
	"sync/atomic"
)

// seriesCache remembers the series of a metric vector by a key (the label
// values that vary on a hot path), so a request costs one map lookup
// instead of WithLabelValues hashing and looking up every label value (and
// formatting them). A series is still created on its first use, by the
// vector, so /metrics lists the same series at the same times. Only for
// vectors whose series are never deleted or reset.
type seriesCache[K comparable, M any] struct {
	create func(K) M
	mu     sync.Mutex              // serializes additions
	series atomic.Pointer[map[K]M] // never modified once stored
}

// newSeriesCache returns a cache creating a series with create.
func newSeriesCache[K comparable, M any](create func(K) M) *seriesCache[K, M] {
	return &seriesCache[K, M]{create: create}
}

// get returns the series of k, created on its first use.
func (c *seriesCache[K, M]) get(k K) M {
	if m := c.series.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.series.Load()
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
	}
	next := make(map[K]M)
	if old != nil {
		for key, v := range *old {
			next[key] = v
		}
	}
	v := c.create(k)
	next[k] = v
	c.series.Store(&next)
	return v
}
