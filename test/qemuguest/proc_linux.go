package qemuguest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill QEMU when the process that started it ends, however it
// ends: a test binary killed by its timeout must not leave guests running on the machine's cores.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
