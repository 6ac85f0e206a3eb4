package pvesim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// guestProcess is a command started through agent/exec. The simulated guest understands a few
// programs so hooks can be tested for real: true, false, echo ARGS, sleep SECONDS and
// exit CODE; anything else fails to start, as qemu-ga's guest-exec does for a missing program.
type guestProcess struct {
	pid      int
	command  []string
	start    time.Time
	duration time.Duration
	exitCode int
	stdout   string
	stderr   string
}

// GuestExec is a command the simulated guest was asked to run.
type GuestExec struct {
	VMID    int
	PID     int
	Command []string
	Time    time.Time
}

// interpret decides what a command does in the simulated guest; ok is false when the program
// does not exist.
func interpret(command []string) (p guestProcess, ok bool) {
	p.command = command
	args := command[1:]
	switch command[0] {
	case "true", "/bin/true", "/usr/bin/true":
	case "false", "/bin/false", "/usr/bin/false":
		p.exitCode = 1
	case "echo", "/bin/echo":
		p.stdout = strings.Join(args, " ") + "\n"
	case "sleep", "/bin/sleep":
		secs, err := strconv.ParseFloat(strings.Join(args, ""), 64)
		if err != nil {
			p.exitCode, p.stderr = 1, "sleep: invalid time interval\n"
			break
		}
		p.duration = time.Duration(secs * float64(time.Second))
	case "exit":
		p.exitCode, _ = strconv.Atoi(strings.Join(args, ""))
	default:
		return p, false
	}
	return p, true
}

// agentExec is POST agent/exec: qemu-server's guest-exec through qemu-ga.
func (s *Simulator) agentExec(rq *request) (any, *apiError) {
	if s.qemu != nil {
		return s.qgaExec(rq)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, err := s.agentVM(rq)
	if err != nil {
		return nil, err
	}
	raw, _ := rq.p.str("command")
	var command []string
	if raw != "" {
		command = strings.Split(raw, "\x00")
	}
	if len(command) == 0 {
		return nil, paramErr(map[string]string{"command": "property is missing and it is not optional"})
	}
	p, ok := interpret(command)
	if !ok {
		return nil, errf("Agent error: Failed to execute child process “%s” (No such file or directory)", command[0])
	}
	s.pidSeq++
	p.pid = s.pidSeq
	p.start = time.Now()
	if s.guestProcs == nil {
		s.guestProcs = map[int]map[int]*guestProcess{}
	}
	if s.guestProcs[vm.vmid] == nil {
		s.guestProcs[vm.vmid] = map[int]*guestProcess{}
	}
	s.guestProcs[vm.vmid][p.pid] = &p
	s.guestExecs = append(s.guestExecs, GuestExec{VMID: vm.vmid, PID: p.pid, Command: command, Time: p.start})
	return map[string]any{"pid": p.pid}, nil
}

// agentExecStatus is GET agent/exec-status. Like qemu-ga, a finished process's status is handed
// out once and then forgotten.
func (s *Simulator) agentExecStatus(rq *request) (any, *apiError) {
	if s.qemu != nil {
		return s.qgaExecStatus(rq)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, err := s.agentVM(rq)
	if err != nil {
		return nil, err
	}
	pid := atoiOr(rq.p.get("pid"), 0)
	p, ok := s.guestProcs[vm.vmid][pid]
	if !ok {
		return nil, errf("Agent error: Invalid parameter 'pid'")
	}
	if time.Since(p.start) < p.duration {
		return map[string]any{"exited": 0}, nil
	}
	delete(s.guestProcs[vm.vmid], pid)
	out := map[string]any{"exited": 1, "exitcode": p.exitCode}
	if p.stdout != "" {
		out["out-data"] = p.stdout
	}
	if p.stderr != "" {
		out["err-data"] = p.stderr
	}
	return out, nil
}

// GuestExecs returns the commands run through agent/exec in vmid's guest, oldest first.
func (s *Simulator) GuestExecs(vmid int) []GuestExec {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []GuestExec
	for _, e := range s.guestExecs {
		if e.VMID == vmid {
			out = append(out, GuestExec{VMID: e.VMID, PID: e.PID, Command: append([]string(nil), e.Command...), Time: e.Time})
		}
	}
	return out
}

func (p guestProcess) String() string { return fmt.Sprintf("pid %d %v", p.pid, p.command) }
