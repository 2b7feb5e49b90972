// Command bench is `make bench`: it runs the load test (test/load) over
// every workload it lists, across policy counts, over HTTP/1.1 and HTTP/2,
// each beside the bare transport server; then its reload test (the zoo)
// across set sizes, and its start-up and validate test over every workload
// across the same sizes; and writes the report: a Markdown section of
// docs/performance.md (between its generated-section markers) and SVG plots
// under docs/performance/.
//
//	go run ./test/bench -kcedar bin/kcedar              # the full sweep
//	go run ./test/bench -kcedar bin/kcedar -quick       # a short one
package main
