//go:build !linux

package spirelocal

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
