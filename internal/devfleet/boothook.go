package devfleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hyperfleet-io/hyperfleet/internal/spirelocal"
	"github.com/hyperfleet-io/hyperfleet/pkg/agent"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// VMEvent is one thing that happened to a simulated VM's guest, for the console feed.
type VMEvent struct {
	VMID int
	Name string
	// Kind is "booted", "idle" (no HyperFleet agent in the user-data: the guest just runs),
	// "exited" (the agent ended, so the VM powers off) or "stopped" (from outside).
	Kind string
	// Err is the agent's failure, if it exited with one.
	Err error
}

// booter is the simulator's BootHook: each VM that starts runs the real hyperfleet-agent binary
// against the user-data the VM was given, as cloud-init's systemd unit would; the VM powers off
// when the agent exits, and a VM stopped from outside kills its agent and runner at once.
type booter struct {
	agentBin string
	// spireAgentBin runs as the VM's spire-agent when its user-data configures one.
	spireAgentBin string
	logDir        string
	jobDuration   time.Duration
	observe       func(VMEvent)
}

func (b *booter) hook(ctx context.Context, vm pvesim.BootVM) error {
	logf, err := os.OpenFile(filepath.Join(b.logDir, fmt.Sprintf("vm-%d-%s.log", vm.VMID, vm.Name)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	fmt.Fprintf(logf, "=== %s VM %d (%s) boots\n", time.Now().Format(time.RFC3339), vm.VMID, vm.Name)
	if _, err := agent.ConfigFromUserData(vm.UserData, agent.DefaultConfigPath); err != nil {
		// Not a HyperFleet runner (a MachineClaim with its own user-data): like any guest OS it
		// runs until it is stopped.
		fmt.Fprintf(logf, "=== no HyperFleet agent configuration in the %d bytes of user-data (%v); the guest idles\n", len(vm.UserData), err)
		b.emit(VMEvent{VMID: vm.VMID, Name: vm.Name, Kind: "idle"})
		<-ctx.Done()
		fmt.Fprintf(logf, "=== %s VM %d stopped\n", time.Now().Format(time.RFC3339), vm.VMID)
		return ctx.Err()
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("hyperfleet-vm%d-", vm.VMID))
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	userData := filepath.Join(dir, "user-data")
	if err := os.WriteFile(userData, vm.UserData, 0o600); err != nil {
		return err
	}

	// The agent's own power-off command is a no-op: the VM powers off when the agent exits.
	args := []string{"--user-data", userData, "--runner-dir", filepath.Join(dir, "actions-runner"),
		"--power-off-command", "true", "--retry-interval", "1s", "--retry-window", "2m", "--stop-grace", "5s"}
	if spireConf, err := agent.FileFromUserData(vm.UserData, bootstrap.SPIREAgentConfigPath); err == nil {
		// spire-agent first, as its systemd unit is ordered before the HyperFleet agent's.
		paths := spirelocal.AgentPathsIn(filepath.Join(dir, "spire"))
		stop, err := b.startSPIREAgent(vm, logf, paths, spireConf)
		if err != nil {
			fmt.Fprintf(logf, "=== spire-agent: %v\n", err)
		} else {
			defer stop()
			args = append(args, "--workload-api-address", paths.WorkloadAPI(), "--spire-agent-config", paths.Config)
		}
	}
	cmd := exec.Command(b.agentBin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "FAKERUNNER_JOB_DURATION="+b.jobDuration.String(),
		"FAKEGITLABRUNNER_JOB_DURATION="+b.jobDuration.String(), "FAKEBUILDKITEAGENT_JOB_DURATION="+b.jobDuration.String(),
		"HOME="+dir)
	// A session of its own: the runner the agent starts gets a process group of its own, so only
	// the session reaches every process of this "VM".
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the agent: %w", err)
	}
	b.emit(VMEvent{VMID: vm.VMID, Name: vm.Name, Kind: "booted"})
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// Stopped or destroyed from outside: a VM that loses power runs nothing any more.
		killSession(cmd.Process.Pid)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		killSession(cmd.Process.Pid) // whatever forked meanwhile
		err = ctx.Err()
	}
	killSession(cmd.Process.Pid) // a runner the agent left behind
	fmt.Fprintf(logf, "=== %s VM %d guest exited: %v\n", time.Now().Format(time.RFC3339), vm.VMID, err)
	if errors.Is(err, context.Canceled) {
		b.emit(VMEvent{VMID: vm.VMID, Name: vm.Name, Kind: "stopped"})
	} else {
		b.emit(VMEvent{VMID: vm.VMID, Name: vm.Name, Kind: "exited", Err: err})
	}
	return err
}

// startSPIREAgent runs the VM's spire-agent with the configuration and trust bundle its user-data
// writes, moved to paths, in a session of its own. It returns how to stop it.
func (b *booter) startSPIREAgent(vm pvesim.BootVM, logf *os.File, paths spirelocal.AgentPaths, conf []byte) (func(), error) {
	if b.spireAgentBin == "" {
		return nil, errors.New("the user-data configures spire-agent, but this fleet has no SPIRE binaries")
	}
	bundle, err := agent.FileFromUserData(vm.UserData, bootstrap.SPIREAgentBundlePath)
	if err != nil {
		return nil, err
	}
	if err := paths.WriteAgentFiles(string(conf), bundle); err != nil {
		return nil, err
	}
	cmd := exec.Command(b.spireAgentBin, "run", "-config", paths.Config)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "=== spire-agent (pid %d) attests with the VM's join token\n", cmd.Process.Pid)
	return func() {
		killSession(cmd.Process.Pid)
		_ = cmd.Wait()
	}, nil
}

func (b *booter) emit(e VMEvent) {
	if b.observe != nil {
		b.observe(e)
	}
}

// killSession SIGKILLs every process of session sid (Linux /proc; elsewhere only the leader's
// process group).
func killSession(sid int) {
	_ = syscall.Kill(-sid, syscall.SIGKILL)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == sid {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...; comm may contain spaces and parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 3 && fields[3] == strconv.Itoa(sid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
