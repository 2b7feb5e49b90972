package main

import "testing"

func TestHeadroomPercent(t *testing.T) {
	const mi = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{16 * mi, 64 * mi, 400},   // a small set: room for 64 MiB
		{20 * mi, 64 * mi, 320},   // rounded up, never below the room asked for
		{64 * mi, 64 * mi, 100},   // the default already leaves it
		{600 * mi, 64 * mi, 100},  // a large set keeps the default's pacing
		{1, 64 * mi, 10000},       // an almost empty heap: capped
		{3 * mi, 64*mi + 1, 2134}, // ceil
	} {
		got := headroomPercent(c.live, c.headroom)
		if got != c.want {
			t.Errorf("headroomPercent(%d, %d) = %d, want %d", c.live, c.headroom, got, c.want)
		}
		if grow := c.live * uint64(got) / 100; got < 10000 && grow < c.headroom {
			t.Errorf("headroomPercent(%d, %d) = %d lets the heap grow by %d only", c.live, c.headroom, got, grow)
		}
	}
}
