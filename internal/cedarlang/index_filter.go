package cedarlang

import "slices"

// A bucket's affix filter: a request cuts its value to every `like` prefix
// and suffix length a bucket keys, and takes every window of every gram
// length: dozens of keys per value and bucket, most of which the bucket
// does not hold. Each bucket keeps a bit array of the slot keys of its
// `like` keys (under any tag), which a request checks before probing the
// table, so the lengths and windows cost a bit test each (the array is
// small, and in cache) and only the keys the bucket holds (and a few false
// positives) cost a probe of the table. A false positive costs a probe,
// never a candidate; a key is never missed.

// filterBitsPerKey is the bits of a filter per key it holds (at least):
// one bit set per key, so about 1 in 16 absent keys passes.
const filterBitsPerKey = 16

// noteAffixKey records k, the slot key of a `like` key filed in b.
func (b *bucket) noteAffixKey(k uint64) { b.affixKeys = append(b.affixKeys, k) }

// updateFilter makes b's filter hold every key noteAffixKey recorded: the
// new ones set in a copy (the filter may be shared with the index b was
// derived from), or all of them in a new, larger array when they would
// fill it past filterBitsPerKey per key.
func (b *bucket) updateFilter() {
	n := len(b.affixKeys)
	if n == b.filtered {
		return
	}
	if len(b.filter)*64 < n*filterBitsPerKey {
		words := 1
		for words*64 < 2*n*filterBitsPerKey {
			words *= 2
		}
		b.filter, b.filtered = make([]uint64, words), 0
	} else {
		b.filter = slices.Clone(b.filter)
	}
	for _, k := range b.affixKeys[b.filtered:] {
		i := b.filterBit(k)
		b.filter[i>>6] |= 1 << (i & 63)
	}
	b.filtered = n
}

// filterBit is k's bit in b's filter (its bits above the home slot's).
func (b *bucket) filterBit(k uint64) uint64 { return k >> 20 & uint64(len(b.filter)*64-1) }

// mayHold reports whether b may hold the `like` key k.
func (b *bucket) mayHold(k uint64) bool {
	if len(b.filter) == 0 {
		return true
	}
	i := b.filterBit(k)
	return b.filter[i>>6]&(1<<(i&63)) != 0
}
