package pvesim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Storage replication (/etc/pve/replication.cfg): a job copies a guest's local volumes to a target
// node on a schedule. PVE refuses a job for a guest with a volume whose storage cannot replicate
// (only ZFS can), and pvescheduler runs due jobs. The simulator runs a job a task's time after it
// is created and after schedule_now; its status then shows last_sync.

type replJob struct {
	id                string
	guest, jobnum     int
	target, schedule  string
	source, comment   string
	rate              string
	disable           bool
	lastSync, lastTry int64
	duration          float64
	failCount         int
	err               string
	running           bool
}

// replicatableVolumes is get_replicatable_volumes: the guest's local disk volumes, or the error
// PVE gives for the first that cannot be replicated. Called with s.mu held.
func (s *Simulator) replicatableVolumes(vm *vmState) ([]string, *apiError) {
	var vols []string
	for _, k := range sortedKeys(vm.conf) {
		d := parseDrive(vm.conf[k])
		if !isDriveKey(k) || d.isCDROM() || d.storage == "" {
			continue
		}
		st := s.storage(d.storage)
		if st == nil || st.shared {
			continue
		}
		if !storageHasReplicate(st.typ) {
			return nil, errf("missing replicate feature on volume '%s'", d.volid())
		}
		vols = append(vols, d.volid())
	}
	return vols, nil
}

func splitJobID(id string) (int, int) {
	g, n, _ := strings.Cut(id, "-")
	return atoiOr(g, 0), atoiOr(n, 0)
}

func (s *Simulator) replJobJSON(j *replJob) map[string]any {
	e := map[string]any{"id": j.id, "guest": j.guest, "jobnum": j.jobnum, "target": j.target, "type": "local"}
	if j.schedule != "" {
		e["schedule"] = j.schedule
	}
	if j.source != "" {
		e["source"] = j.source
	}
	if j.comment != "" {
		e["comment"] = j.comment
	}
	if j.rate != "" {
		if f, err := strconv.ParseFloat(j.rate, 64); err == nil {
			e["rate"] = f
		}
	}
	if j.disable {
		e["disable"] = 1
	}
	return e
}

func (s *Simulator) getReplicationJobs(*request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.repl {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := []map[string]any{}
	for _, id := range ids {
		out = append(out, s.replJobJSON(s.repl[id]))
	}
	return out, nil
}

func (s *Simulator) getReplicationJob(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.repl[rq.p.get("id")]
	if j == nil {
		return nil, errf("replication job '%s' does not exist", rq.p.get("id"))
	}
	e := s.replJobJSON(j)
	e["digest"] = fwDigest(len(s.repl))
	return e, nil
}

func (s *Simulator) postReplicationJob(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, target := rq.p.get("id"), rq.p.get("target")
	guest, jobnum := splitJobID(id)
	if s.repl[id] != nil {
		return nil, errf("replication job '%s' already exists", id)
	}
	vm, ok := s.vms[guest]
	if !ok {
		return nil, errf("guest '%d' does not exist", guest)
	}
	if s.node(target) == nil {
		return nil, errf("no such node '%s'", target)
	}
	if target == vm.node {
		return nil, errf("unable to replicate to local node '%s'", target)
	}
	for _, j := range s.repl {
		if j.guest == guest && j.target == target {
			return nil, errf("replication job for guest '%d' to target '%s' already exists", guest, target)
		}
	}
	if _, err := s.replicatableVolumes(vm); err != nil {
		return nil, err
	}
	j := &replJob{id: id, guest: guest, jobnum: jobnum, target: target, schedule: rq.p.get("schedule"),
		source: vm.node, comment: rq.p.get("comment"), rate: rq.p.get("rate"), disable: rq.p.flag("disable")}
	s.repl[id] = j
	s.scheduleReplication(j)
	return nil, nil
}

func (s *Simulator) putReplicationJob(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.repl[rq.p.get("id")]
	if j == nil {
		return nil, errf("replication job '%s' does not exist", rq.p.get("id"))
	}
	for _, k := range splitList(rq.p.get("delete")) {
		switch k {
		case "schedule":
			j.schedule = ""
		case "rate":
			j.rate = ""
		case "comment":
			j.comment = ""
		case "disable":
			j.disable = false
		}
	}
	if v, ok := rq.p.str("schedule"); ok {
		j.schedule = v
	}
	if v, ok := rq.p.str("rate"); ok {
		j.rate = v
	}
	if v, ok := rq.p.str("comment"); ok {
		j.comment = v
	}
	if _, ok := rq.p.str("disable"); ok {
		j.disable = rq.p.flag("disable")
	}
	return nil, nil
}

func (s *Simulator) deleteReplicationJob(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := rq.p.get("id")
	if s.repl[id] == nil {
		return nil, errf("replication job '%s' does not exist", id)
	}
	// PVE marks the job for removal and the next run removes it; the simulator removes it at once.
	delete(s.repl, id)
	return nil, nil
}

func (s *Simulator) getReplicationStatus(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.repl[rq.p.get("id")]
	if j == nil || j.source != rq.p.get("node") {
		return nil, errf("no such replication job")
	}
	e := s.replJobJSON(j)
	e["last_sync"], e["last_try"], e["fail_count"], e["duration"] = j.lastSync, j.lastTry, j.failCount, j.duration
	e["next_sync"] = time.Now().Add(15 * time.Minute).Unix()
	if j.err != "" {
		e["error"] = j.err
	}
	if j.running {
		e["pid"] = 4242
	}
	return e, nil
}

func (s *Simulator) postReplicationScheduleNow(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.repl[rq.p.get("id")]
	if j == nil || j.source != rq.p.get("node") {
		return nil, errf("no such replication job")
	}
	s.scheduleReplication(j)
	return nil, nil
}

// scheduleReplication runs j after TaskDuration, as pvescheduler would on its next tick. Called
// with s.mu held.
func (s *Simulator) scheduleReplication(j *replJob) {
	if j.disable {
		return
	}
	time.AfterFunc(s.cfg.TaskDuration, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed || s.repl[j.id] != j {
			return
		}
		s.runReplication(j)
	})
}

// runReplication is one run of the job: it succeeds when the guest's volumes can be replicated
// and the target is online. Called with s.mu held.
func (s *Simulator) runReplication(j *replJob) {
	now := time.Now()
	j.lastTry = now.Unix()
	vm, ok := s.vms[j.guest]
	var failure string
	switch {
	case !ok:
		failure = fmt.Sprintf("guest '%d' does not exist", j.guest)
	case s.node(j.target) == nil || !s.node(j.target).online:
		failure = fmt.Sprintf("ssh: connect to host %s port 22: No route to host", j.target)
	default:
		if _, err := s.replicatableVolumes(vm); err != nil {
			failure = strings.TrimSuffix(err.Message, "\n")
		}
	}
	if failure != "" {
		j.failCount++
		j.err = failure
		return
	}
	j.lastSync, j.failCount, j.err, j.duration = now.Unix(), 0, "", 0.8
}

// RunReplication runs the replication job id now, as pvescheduler would when it is due.
func (s *Simulator) RunReplication(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.repl[id]
	if j == nil {
		return fmt.Errorf("pvesim: no replication job %q", id)
	}
	s.runReplication(j)
	return nil
}

// dropReplicationJobs removes a destroyed guest's jobs. Called with s.mu held.
func (s *Simulator) dropReplicationJobs(vmid int) {
	for id, j := range s.repl {
		if j.guest == vmid {
			delete(s.repl, id)
		}
	}
}
