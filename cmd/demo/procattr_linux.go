package main

import "syscall"

// childAttr puts a child in its own process group (a Ctrl-C reaches the
// demo, which stops its children in order) and has the kernel send it
// SIGTERM should the demo die without cleaning up (SIGKILL, a crash).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
