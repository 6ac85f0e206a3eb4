//go:build unix

package agent

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// setProcessAttributes puts the runner in its own process group (so stopping it stops its
// children) and, when the agent runs as root, drops to the configured user: the runner refuses to
// run as root, and a job should not own the VM.
func setProcessAttributes(cmd *exec.Cmd, username string) error {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if username != "" && os.Geteuid() == 0 {
		u, err := user.Lookup(username)
		if err != nil {
			return fmt.Errorf("runner user: %w", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		cmd.Env = append(cmd.Env, "HOME="+u.HomeDir, "USER="+u.Username)
	}
	cmd.SysProcAttr = attr
	return nil
}

func signalGroup(cmd *exec.Cmd, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
