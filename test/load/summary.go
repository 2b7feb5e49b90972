package main

import (
	"crypto/x509"
	"encoding/json"
	"os"
	"time"
)

// summary is one run's medians, as -json writes them for make bench.
type summary struct {
	Workload string `json:"workload"`
	Proto    string `json:"proto"`
	H2Conns  int    `json:"h2Conns,omitempty"`
	Conns    int    `json:"conns"`
	Policies int    `json:"policies"`
	Rounds   int    `json:"rounds"`
	Kcedar   stats  `json:"kcedar"`
	Floor    *stats `json:"floor,omitempty"`
	Bare     *stats `json:"bare,omitempty"`
	// KcedarOverBare is the median over rounds of kcedar's CPU per request
	// over the bare server's in the same round.
	KcedarOverBare float64       `json:"kcedarOverBare,omitempty"`
	Reload         *reloadStats  `json:"reload,omitempty"`
	Startup        *startupStats `json:"startup,omitempty"`
}

// stats are the medians of one phase, durations in microseconds.
type stats struct {
	CPUPerRequestMicros float64 `json:"cpuPerRequestMicros"`
	RequestsPerSecond   float64 `json:"requestsPerSecond"`
	P50Micros           float64 `json:"p50Micros"`
	P99Micros           float64 `json:"p99Micros"`
	RSSMiB              int64   `json:"rssMiB"`
	Errors              int64   `json:"errors"`
}

// reloadStats are -reload's measurements, in microseconds.
type reloadStats struct {
	SteadyP99Micros  float64 `json:"steadyP99Micros"`
	RebuildP99Micros float64 `json:"rebuildP99Micros"`
	AfterP99Micros   float64 `json:"afterP99Micros"`
	// ServingAfterSeconds: from the write of the new set to its first
	// decision, the time a reload of the set takes under load.
	ServingAfterSeconds float64 `json:"servingAfterSeconds"`
}

// startupStats are -startup's measurements.
type startupStats struct {
	ReadySeconds    float64 `json:"readySeconds"`
	ReadyCPUSeconds float64 `json:"readyCPUSeconds"`
	RSSMiB          int64   `json:"rssMiB"`
	ValidateSeconds float64 `json:"validateSeconds"`
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func (r result) export() stats {
	return stats{CPUPerRequestMicros: micros(r.cpuPerReq), RequestsPerSecond: r.rps, P50Micros: micros(r.p50), P99Micros: micros(r.p99), RSSMiB: r.rssKB / 1024, Errors: r.errors}
}

// writeSummary writes sum to path (-json) as indented JSON.
func writeSummary(path string, sum summary) error {
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// newPool is a certificate pool of the PEM certificates in pem.
func newPool(pem []byte) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return pool
}
