// Package parallel runs independent pieces of work on every core: loading and
// validating large policy sets uses it.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// For calls f(0) ... f(n-1) on GOMAXPROCS workers and waits for them. The
// calls must be independent; f writes its result at its own index.
func For(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(n, runtime.GOMAXPROCS(0)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		}()
	}
	wg.Wait()
}
