package hvsim

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// shell is one remote shell (winrs), visible only to the user who created it.
type shell struct {
	id, owner string
	commands  map[string]*command
	lastUsed  time.Time
	// idle is how long the shell may go without a request: the IdleTimeOut its Create asked
	// for, at most the server's ShellIdleTimeout.
	idle time.Duration
}

// reapLocked closes shells idle for longer than their idle timeout; s.mu is held.
func (s *Server) reapLocked(now time.Time) {
	for id, sh := range s.shells {
		if now.Sub(sh.lastUsed) <= sh.idle {
			continue
		}
		for _, c := range sh.commands {
			if c.cancel != nil {
				c.cancel()
			}
		}
		delete(s.shells, id)
	}
}

// command is one command line in a shell. The Executor takes stdin whole, so the command starts
// when its stdin ends (Send End="true") or at its first Receive, whichever comes first, with the
// stdin sent by then: stdin a client sends after it has begun to read output is ignored.
type command struct {
	id, line   string
	stdin      bytes.Buffer
	stdinEnded bool
	started    bool
	cancel     context.CancelFunc
	done       chan struct{} // closed when the executor returns

	// Set once done: output not yet delivered to a Receive.
	stdout, stderr []byte
	exitCode       int
}

// lookupShell returns the user's shell named by the request's ShellId selector, or answers with
// WinRM's shell-not-found fault: another user's shell does not exist for this user.
func (s *Server) lookupShell(w http.ResponseWriter, env *envelope, user string) *shell {
	id := env.selector("ShellId")
	s.mu.Lock()
	now := time.Now()
	s.reapLocked(now)
	sh := s.shells[strings.ToUpper(id)]
	if sh != nil && sh.owner == user {
		sh.lastUsed = now
	}
	s.mu.Unlock()
	if sh == nil || sh.owner != user {
		s.writeFault(w, env, faultFor(FaultShellNotFound, id))
		return nil
	}
	return sh
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, env *envelope, user string) {
	idle := s.opts.ShellIdleTimeout
	if b := env.Body.Shell; b != nil && strings.TrimSpace(b.IdleTimeOut) != "" {
		d, ok := parseDuration(b.IdleTimeOut)
		if !ok {
			s.writeFault(w, env, schemaInvalid("rsp:IdleTimeOut"))
			return
		}
		if d > 0 {
			idle = min(idle, d)
		}
	}
	s.mu.Lock()
	s.reapLocked(time.Now())
	open := 0
	for _, sh := range s.shells {
		if sh.owner == user {
			open++
		}
	}
	if open >= s.opts.MaxShellsPerUser {
		s.mu.Unlock()
		s.writeFault(w, env, faultFor(FaultShellQuota, fmt.Sprint(s.opts.MaxShellsPerUser)))
		return
	}
	sh := &shell{id: newID(), owner: user, commands: map[string]*command{}, lastUsed: time.Now(), idle: idle}
	s.shells[sh.id] = sh
	s.mu.Unlock()
	clientIP, _, _ := net.SplitHostPort(r.RemoteAddr)
	s.writeSOAP(w, http.StatusOK, createResponse(env.Header.MessageID, s.url, sh.id, user, clientIP, idle))
}

func (s *Server) command(w http.ResponseWriter, env *envelope, user string) {
	sh := s.lookupShell(w, env, user)
	if sh == nil {
		return
	}
	cl := env.Body.CommandLine
	if cl == nil {
		s.writeFault(w, env, schemaInvalid("rsp:CommandLine"))
		return
	}
	if strings.TrimSpace(cl.Command) == "" {
		s.writeFault(w, env, schemaInvalid("rsp:Command"))
		return
	}
	line := strings.TrimSpace(cl.Command)
	for _, a := range cl.Arguments {
		line += " " + a
	}
	if len(line) > MaxCommandLine {
		s.writeFault(w, env, faultFor(FaultCommandLineTooLong, ""))
		return
	}
	c := &command{id: newID(), line: line, done: make(chan struct{})}
	s.mu.Lock()
	sh.commands[c.id] = c
	s.mu.Unlock()
	s.writeSOAP(w, http.StatusOK, commandResponse(env.Header.MessageID, c.id))
}

// lookupCommand finds the command a Send, Receive or Signal names in the user's shell, or answers
// with WinRM's fault for an unknown CommandId (an absent one included: the cmd shell has no
// shell-level streams to read).
func (s *Server) lookupCommand(w http.ResponseWriter, env *envelope, user, id string) (*shell, *command) {
	sh := s.lookupShell(w, env, user)
	if sh == nil {
		return nil, nil
	}
	s.mu.Lock()
	c := sh.commands[strings.ToUpper(id)]
	s.mu.Unlock()
	if c == nil {
		s.writeFault(w, env, commandNotFound())
		return nil, nil
	}
	return sh, c
}

func (s *Server) send(w http.ResponseWriter, env *envelope, user string) {
	if env.Body.Send == nil || len(env.Body.Send.Streams) == 0 {
		s.writeFault(w, env, schemaInvalid("rsp:Stream"))
		return
	}
	for _, st := range env.Body.Send.Streams {
		if st.Name != "stdin" {
			s.writeFault(w, env, faultFor(FaultInvalidParameter, "The stream "+st.Name+" is not an input stream of the shell (stdin). "))
			return
		}
		data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(st.Data))
		if err != nil {
			s.writeFault(w, env, schemaInvalid("rsp:Stream"))
			return
		}
		_, c := s.lookupCommand(w, env, user, st.CommandID)
		if c == nil {
			return
		}
		s.mu.Lock()
		if c.stdinEnded {
			s.mu.Unlock()
			s.writeFault(w, env, faultFor(FaultInvalidParameter, "The command's input stream has already ended. "))
			return
		}
		c.stdin.Write(data)
		if strings.EqualFold(st.End, "true") {
			c.stdinEnded = true
			s.startLocked(c, user)
		}
		s.mu.Unlock()
	}
	s.writeSOAP(w, http.StatusOK, sendResponse(env.Header.MessageID))
}

// startLocked hands the command to the executor once; s.mu is held.
func (s *Server) startLocked(c *command, user string) {
	if c.started {
		return
	}
	c.started = true
	ctx, cancel := context.WithCancel(s.ctx)
	c.cancel = cancel
	stdin := bytes.Clone(c.stdin.Bytes())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		stdout, stderr, code := s.opts.Executor.Run(ctx, user, c.line, stdin)
		s.mu.Lock()
		c.stdout, c.stderr, c.exitCode = stdout, stderr, code
		s.mu.Unlock()
		close(c.done)
	}()
}

func (s *Server) receive(w http.ResponseWriter, r *http.Request, env *envelope, user string) {
	if env.Body.Receive == nil {
		s.writeFault(w, env, schemaInvalid("rsp:DesiredStream"))
		return
	}
	_, c := s.lookupCommand(w, env, user, env.Body.Receive.DesiredStream.CommandID)
	if c == nil {
		return
	}
	s.mu.Lock()
	s.startLocked(c, user)
	s.mu.Unlock()

	wait, ok := parseDuration(env.Header.OperationTimeout)
	if !ok || wait <= 0 {
		wait = defaultOperationTimeout
	}
	if s.opts.ReceiveTimeout > 0 && s.opts.ReceiveTimeout < wait {
		wait = s.opts.ReceiveTimeout
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-c.done:
	case <-timer.C:
		s.writeFault(w, env, faultFor(FaultOperationTimeout, ""))
		return
	case <-r.Context().Done():
		return
	}

	// Output goes out in pieces that keep the response within the client's MaxEnvelopeSize, the
	// state staying Running until the last piece.
	limit := 150 * 1024
	if n, err := fmt.Sscan(env.Header.MaxEnvelopeSize, &limit); n != 1 || err != nil || limit < 8192 {
		limit = 150 * 1024
	}
	budget := (limit - 4096) / 4 * 3
	s.mu.Lock()
	stdout := take(&c.stdout, &budget)
	stderr := take(&c.stderr, &budget)
	finished := len(c.stdout) == 0 && len(c.stderr) == 0
	code := c.exitCode
	s.mu.Unlock()
	s.writeSOAP(w, http.StatusOK, receiveResponse(env.Header.MessageID, c.id, stdout, stderr, finished, code))
}

// take removes up to *budget bytes from the front of *buf.
func take(buf *[]byte, budget *int) []byte {
	n := min(len(*buf), max(*budget, 0))
	out := (*buf)[:n]
	*buf = (*buf)[n:]
	*budget -= n
	return out
}

func (s *Server) signal(w http.ResponseWriter, env *envelope, user string) {
	if env.Body.Signal == nil {
		s.writeFault(w, env, schemaInvalid("rsp:Signal"))
		return
	}
	sh, c := s.lookupCommand(w, env, user, env.Body.Signal.CommandID)
	if c == nil {
		return
	}
	code := strings.TrimSpace(env.Body.Signal.Code)
	if code == signalTerm || code == signalCtrlC {
		s.mu.Lock()
		if c.cancel != nil {
			c.cancel()
		}
		if code == signalTerm {
			delete(sh.commands, c.id)
		}
		s.mu.Unlock()
	}
	s.writeSOAP(w, http.StatusOK, signalResponse(env.Header.MessageID))
}

func (s *Server) delete(w http.ResponseWriter, env *envelope, user string) {
	sh := s.lookupShell(w, env, user)
	if sh == nil {
		return
	}
	s.mu.Lock()
	for _, c := range sh.commands {
		if c.cancel != nil {
			c.cancel()
		}
	}
	delete(s.shells, sh.id)
	s.mu.Unlock()
	s.writeSOAP(w, http.StatusOK, deleteResponse(env.Header.MessageID))
}

// ShellInfo describes an open shell.
type ShellInfo struct {
	ID, Owner string
	// Commands is the number of commands not yet terminated.
	Commands int
}

// Shells lists the open shells.
func (s *Server) Shells() []ShellInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ShellInfo, 0, len(s.shells))
	for _, sh := range s.shells {
		out = append(out, ShellInfo{ID: sh.id, Owner: sh.owner, Commands: len(sh.commands)})
	}
	return out
}
