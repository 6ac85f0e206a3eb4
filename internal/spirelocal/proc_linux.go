package spirelocal

import "syscall"

// sysProcAttr makes the child die with its parent: a killed fleet or test leaves no SPIRE behind.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
