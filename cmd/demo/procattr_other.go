//go:build !linux

package main

import "syscall"

// childAttr puts a child in its own process group: a Ctrl-C reaches the
// demo, which stops its children in order.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
