package pvesim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// task is a PVE worker task identified by its UPID.
type task struct {
	upid      string
	node      string
	typ       string
	id        string
	user      string
	pid       int
	pstart    int
	start     time.Time
	end       time.Time
	running   bool
	exit      string
	log       []string
	cancelled bool
	// interrupt is closed when the task is cancelled, so it ends at once as PVE's worker does
	// on SIGTERM.
	interrupt chan struct{}
}

// taskWork is what a task does when its time is up. run is called with the
// simulator lock held and returns the task's failure, if any; fail undoes
// the task's visible effects when the task fails (by run or by an injected
// fault), like PVE's error cleanup.
type taskWork struct {
	run  func(t *task) error
	fail func()
	// load is what the load model makes the task cost (when the model is on).
	load taskLoad
	// wait, when set, runs when the task's time is up, before run and without the simulator
	// lock: for work that waits on something outside the simulator (a real guest shutting down).
	wait func()
}

// startTask creates a running task and finishes it after TaskDuration (or a
// duration chosen by an injected fault). Called with s.mu held.
func (s *Simulator) startTask(node, typ, id string, a *authInfo, work taskWork, faultKey string) *task {
	now := time.Now()
	s.pidSeq++
	user := a.user
	if user == "" {
		user = "root@pam"
	}
	t := &task{
		node: node, typ: typ, id: id, user: user, pid: s.pidSeq,
		pstart: int(time.Since(processStart)/(10*time.Millisecond)) + 1_000_000 + s.pidSeq,
		start:  now, running: true, interrupt: make(chan struct{}),
	}
	t.upid = fmt.Sprintf("UPID:%s:%08X:%08X:%08X:%s:%s:%s:", node, t.pid, t.pstart, now.Unix(), typ, id, user)
	s.tasks[t.upid] = t
	s.taskList = append(s.taskList, t)
	dur := s.cfg.TaskDuration
	l := s.load
	if l != nil {
		d := work.load.Time
		if d <= 0 {
			d = l.m.TaskTime
		}
		dur = l.jittered(d)
	}
	failText, failDelay := s.taskFault(faultKey)
	if failDelay > 0 {
		dur = failDelay
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		lockFailed := false
		if l != nil && work.load.Lock != "" {
			release := l.lock(work.load.Lock, s.closing)
			if release == nil {
				lockFailed = true
				dur = 0
			} else {
				defer release()
			}
		}
		timer := time.NewTimer(dur)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-t.interrupt:
		case <-s.closing:
		}
		if work.wait != nil && failText == "" && !lockFailed {
			work.wait()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		var err error
		switch {
		case t.cancelled:
			err = fmt.Errorf("received interrupt")
		case lockFailed:
			err = fmt.Errorf("%s%s", work.load.FailPrefix, lockTimeoutText(work.load.LockVMID))
		case failText != "":
			err = fmt.Errorf("%s", failText)
		case work.run != nil:
			err = work.run(t)
		}
		if err != nil && work.fail != nil {
			work.fail()
		}
		s.finishTask(t, err)
	}()
	return t
}

var processStart = time.Now()

func (s *Simulator) finishTask(t *task, err error) {
	t.running = false
	t.end = time.Now()
	if err != nil {
		msg := err.Error()
		if ae, ok := err.(*apiError); ok {
			// A worker's die text is the exit status as it is, without an HTTP status.
			msg = ae.Message
		}
		msg = strings.TrimRight(msg, "\n")
		msg, _, _ = strings.Cut(msg, "\n")
		t.exit = msg
		t.log = append(t.log, "TASK ERROR: "+msg)
	} else {
		t.exit = "OK"
		t.log = append(t.log, "TASK OK")
	}
	s.log.Debug("task finished", "upid", t.upid, "exitstatus", t.exit)
}

func (s *Simulator) taskJSON(t *task) map[string]any {
	m := map[string]any{
		"upid": t.upid, "node": t.node, "pid": t.pid, "pstart": t.pstart,
		"starttime": t.start.Unix(), "type": t.typ, "id": t.id, "user": t.user,
		"status": "running",
	}
	if u, tok, ok := strings.Cut(t.user, "!"); ok {
		m["user"], m["tokenid"] = u, tok
	}
	if !t.running {
		m["status"] = "stopped"
		m["exitstatus"] = t.exit
	}
	return m
}

func (s *Simulator) lookupTask(upid string) (*task, *apiError) {
	if !upidRe.MatchString(upid) {
		return nil, paramErr(map[string]string{"upid": "unable to parse worker upid"})
	}
	t, ok := s.tasks[upid]
	if !ok {
		return nil, paramErr(map[string]string{"upid": "no such task"})
	}
	return t, nil
}

func (s *Simulator) getTaskStatus(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.lookupTask(rq.p.get("upid"))
	if err != nil {
		return nil, err
	}
	return s.taskJSON(t), nil
}

func (s *Simulator) getTaskLog(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.lookupTask(rq.p.get("upid"))
	if err != nil {
		return nil, err
	}
	start := atoiOr(rq.p.get("start"), 0)
	limit := atoiOr(rq.p.get("limit"), 50)
	lines := append([]string{fmt.Sprintf("%s %s %s", t.typ, t.id, t.start.Format(time.RFC3339))}, t.log...)
	out := []map[string]any{}
	for i := start; i < len(lines) && len(out) < limit; i++ {
		out = append(out, map[string]any{"n": i + 1, "t": lines[i]})
	}
	return out, nil
}

// deleteTask is DELETE /nodes/{node}/tasks/{upid}: stop a running task.
func (s *Simulator) deleteTask(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.lookupTask(rq.p.get("upid"))
	if err != nil {
		return nil, err
	}
	if t.running && !t.cancelled {
		t.cancelled = true
		close(t.interrupt)
	}
	return nil, nil
}

func (s *Simulator) taskRows(node string, filter func(*task) bool) []map[string]any {
	out := []map[string]any{}
	for i := len(s.taskList) - 1; i >= 0; i-- {
		t := s.taskList[i]
		if (node != "" && t.node != node) || (filter != nil && !filter(t)) {
			continue
		}
		row := s.taskJSON(t)
		if !t.running {
			row["endtime"] = t.end.Unix()
			row["status"] = t.exit
		}
		out = append(out, row)
	}
	return out
}

func (s *Simulator) getNodeTasks(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vmid := rq.p.get("vmid")
	limit := atoiOr(rq.p.get("limit"), 50)
	rows := s.taskRows(rq.p.get("node"), func(t *task) bool {
		if vmid != "" && t.id != vmid {
			return false
		}
		return rq.p.get("source") != "active" || t.running
	})
	if len(rows) > limit {
		rows = rows[:limit]
	}
	return rows, nil
}

func (s *Simulator) getClusterTasks(*request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.taskRows("", nil), nil
}

// upidRe is PVE::UPID::decode's pattern.
var upidRe = mustRe(`^UPID:([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?):([0-9A-Fa-f]{8}):([0-9A-Fa-f]{8,9}):([0-9A-Fa-f]{8}):([^:\s/]+):([^:\s/]*):([^:\s/]+):$`)

func vmidStr(n int) string { return strconv.Itoa(n) }
