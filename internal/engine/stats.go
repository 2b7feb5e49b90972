package engine

// CacheResult is the decision cache's part in one decision.
type CacheResult uint8

const (
	// CacheNone: the decision was not looked up in the cache (no cache, or
	// a request whose decision is never cached).
	CacheNone CacheResult = iota
	// CacheHit: the decision came from the cache; no policy was evaluated.
	CacheHit
	// CacheMiss: looked up, not found, decided now.
	CacheMiss
)

// String names r for traces and logs: "none", "hit" or "miss".
func (r CacheResult) String() string {
	switch r {
	case CacheHit:
		return "hit"
	case CacheMiss:
		return "miss"
	}
	return "none"
}

// Stats describe how one decision was made, for a caller that records them
// (the server's traces): the engine itself keeps no record of a decision.
type Stats struct {
	// Cache is the decision cache's part.
	Cache CacheResult
	// Candidates is the number of candidate policies evaluated (enforced
	// and audit, over every verb and world the request stands for): 0 on a
	// cache hit, and for a request no policy is a candidate for.
	Candidates int
}

// setCache records the cache's part; st may be nil (nothing to record).
func (st *Stats) setCache(r CacheResult) {
	if st != nil {
		st.Cache = r
	}
}

// addCandidates counts n evaluated candidates; st may be nil.
func (st *Stats) addCandidates(n int) {
	if st != nil {
		st.Candidates += n
	}
}
