package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// profileEnv names a file to write a CPU profile of the whole run to
// (KCEDAR_CPU_PROFILE=/tmp/kcedar.prof kcedar serve ...): how the load and
// cost tests' figures are explained. The profile is written when the
// command returns (serve: on SIGTERM or SIGINT).
const profileEnv = "KCEDAR_CPU_PROFILE"

// startProfile starts the CPU profile profileEnv asks for and returns the
// function that stops and writes it.
func startProfile() (stop func()) {
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
