package cedarlang

import (
	"crypto/sha256"
	"slices"
	"sort"

	cedarlib "github.com/cedar-policy/cedar-go"
)

// reparseAround is Reparse for a file edited in one place, at the cost of
// the edit rather than the file. The old and new texts share a prefix and
// a suffix; the policies whose text lies in the shared prefix are prev's
// as they are, the new text is read from the end of the last of them until
// a policy ends where an old one ended within the shared suffix (from
// there on the texts are the same, and so are the policies, moved by the
// difference in length), and only the policies between are matched by
// content or parsed. ok is false when prev does not record where its
// policies end in old, the file was renamed, or the text between does not
// read cleanly: Reparse then reads both texts whole, and reports any error
// as ParsePolicies does.
func reparseAround(fileName string, src []byte, oldName string, old []byte, prev []*Policy) (policies, fresh []*Policy, ok bool) {
	oldEnds, ok := knownEnds(oldName, old, prev)
	if !ok || fileName != oldName {
		return nil, nil, false
	}
	pre := commonPrefix(old, src)
	suf := commonSuffix(old[pre:], src[pre:])
	delta := len(src) - len(old)
	k := sort.SearchInts(oldEnds, pre+1) // the policies ending within the prefix
	from := 0
	if k > 0 {
		from = oldEnds[k-1]
	}
	aligned := -1 // the old policy whose end the new text reaches in the suffix
	mid, err := nestingEndsFrom(src, from, func(end int) bool {
		if end < len(src)-suf {
			return false
		}
		i, found := slices.BinarySearch(oldEnds, end-delta)
		if found {
			aligned = i
		}
		return found
	})
	if err != nil {
		return nil, nil, false
	}
	oldMid, sufStart := len(prev), len(prev)
	ends := append(slices.Clip(oldEnds[:k]), mid...)
	if aligned >= 0 {
		oldMid, sufStart = max(k, aligned+1), aligned+1
		for _, e := range oldEnds[sufStart:] {
			ends = append(ends, e+delta)
		}
	} else if !emptyTail(fileName, src, ends) {
		return nil, nil, false
	}
	return placeAround(fileName, src, old, prev, oldEnds, ends, k, oldMid, sufStart, len(mid))
}

// emptyTail reports whether the text of src after its last policy (ends)
// holds no policy and no error, as ParsePolicies requires.
func emptyTail(fileName string, src []byte, ends []int) bool {
	tailAt := 0
	if len(ends) > 0 {
		tailAt = ends[len(ends)-1]
	}
	tail, err := cedarlib.NewPolicyListFromBytes(fileName, src[tailAt:])
	return err == nil && len(tail) == 0
}

// placeAround builds the policies of src (ends: where each ends) for
// reparseAround: prev[:k] as they are, the len(mid) policies after them
// matched by content among prev[k:oldMid] or parsed, and prev[sufStart:]
// moved to the ends after those.
func placeAround(fileName string, src, old []byte, prev []*Policy, oldEnds, ends []int, k, oldMid, sufStart, mid int) (policies, fresh []*Policy, ok bool) {
	oldLayout, layout := chunkLayout(old, oldEnds), chunkLayout(src, ends)
	known := make(map[[32]byte][]placed, oldMid-k)
	for i := k; i < oldMid; i++ {
		h := sha256.Sum256(old[oldLayout[i].start:oldEnds[i]])
		known[h] = append(known[h], placed{p: prev[i], at: oldLayout[i]})
	}
	policies = make([]*Policy, 0, len(ends))
	policies = append(policies, prev[:k]...)
	for j := k; j < k+mid; j++ {
		at := layout[j]
		text := src[at.start:ends[j]]
		h := sha256.Sum256(text)
		if l := known[h]; len(l) > 0 {
			known[h] = l[1:]
			policies = append(policies, l[0].p.moved(fileName, l[0].at, at))
			continue
		}
		p, err := parseChunk(fileName, src, text, at)
		if err != nil {
			return nil, nil, false
		}
		policies, fresh = append(policies, p), append(fresh, p)
	}
	for i := sufStart; i < len(prev); i++ {
		j := len(policies)
		policies = append(policies, prev[i].moved(fileName, oldLayout[i], layout[j]))
	}
	return policies, fresh, true
}

// knownEnds is where each of prev's policies ends in old, its file's text,
// when every one records it (textEnd), in order, just after a `;`.
func knownEnds(oldName string, old []byte, prev []*Policy) ([]int, bool) {
	ends := make([]int, len(prev))
	last := 0
	for i, p := range prev {
		e := p.textEnd
		if e <= last || e > len(old) || old[e-1] != ';' || p.AST.Position.Filename != oldName {
			return nil, false
		}
		ends[i], last = e, e
	}
	return ends, true
}

// commonPrefix is the length of the longest prefix a and b share.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n && string(a[i:i+8]) == string(b[i:i+8]) {
		i += 8
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// commonSuffix is the length of the longest suffix a and b share.
func commonSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n && string(a[len(a)-i-8:len(a)-i]) == string(b[len(b)-i-8:len(b)-i]) {
		i += 8
	}
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return i
}
