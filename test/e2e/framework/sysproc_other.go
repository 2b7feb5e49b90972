//go:build unix && !linux

package framework

import "syscall"

// sysProcAttr puts the child in its own process group. Without Pdeathsig
// (Linux only) a killed test binary can leave its children running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
