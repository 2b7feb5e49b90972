package server

import rtmetrics "runtime/metrics"

// heapNearGoal: the heap's objects take most of the goal at which the
// runtime starts the next collection (0: not known).
func heapNearGoal(objects, goal uint64) bool {
	return goal > 0 && objects*10 >= goal*7
}

// readHeap is the bytes of heap objects (live and not yet swept) and the
// heap goal, from runtime/metrics.
func readHeap() (objects, goal uint64) {
	samples := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	rtmetrics.Read(samples)
	if samples[0].Value.Kind() != rtmetrics.KindUint64 || samples[1].Value.Kind() != rtmetrics.KindUint64 {
		return 0, 0
	}
	return samples[0].Value.Uint64(), samples[1].Value.Uint64()
}
