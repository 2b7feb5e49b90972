package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// profileEnv names a file to write a CPU profile of the whole run to
// (KCEDAR_CPU_PROFILE=/tmp/kcedar.prof kcedar serve ...), and memProfileEnv
// one for the allocations of the whole run (KCEDAR_MEM_PROFILE): how the
// load and cost tests' figures are explained. Profiles are written when the
// command returns (serve: on SIGTERM or SIGINT).
const (
	profileEnv    = "KCEDAR_CPU_PROFILE"
	memProfileEnv = "KCEDAR_MEM_PROFILE"
)

// startProfile starts the profiles profileEnv and memProfileEnv ask for and
// returns the function that stops and writes them.
func startProfile() (stop func()) {
	stopCPU := startCPUProfile()
	return func() {
		stopCPU()
		writeMemProfile()
	}
}

func startCPUProfile() (stop func()) {
	path := os.Getenv(profileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kcedar: %s: %v\n", profileEnv, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}

// writeMemProfile writes the allocations profile (every allocation since
// start, sampled at the runtime's default rate) memProfileEnv asks for.
func writeMemProfile() {
	path := os.Getenv(memProfileEnv)
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		_ = f.Close()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kcedar: %s: %v\n", memProfileEnv, err)
	}
}
