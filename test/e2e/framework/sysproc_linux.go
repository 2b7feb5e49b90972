package framework

import "syscall"

// sysProcAttr puts the child in its own process group and has the kernel
// SIGKILL it when the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
