//go:build !linux

package qemuguest

import "os/exec"

// dieWithParent does nothing where the kernel has no parent-death signal: a guest may outlive a
// killed test binary there.
func dieWithParent(*exec.Cmd) {}
