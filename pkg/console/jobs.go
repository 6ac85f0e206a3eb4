package console

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// Operations a job can be.
const (
	opCreate   = "create"
	opDelete   = "delete"
	opPowerOn  = "power-on"
	opPowerOff = "power-off"
)

// Job states.
const (
	JobRunning   = "Running"
	JobSucceeded = "Succeeded"
	JobFailed    = "Failed"
)

// Job is one operation on a VM. Jobs are not stored anywhere: each is derived from its
// MachineClaim (phase, conditions, deletion, power state), so a restarted console knows them all.
type Job struct {
	ID        string    `json:"id"`
	Operation string    `json:"operation"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	State     string    `json:"state"`
	Message   string    `json:"message,omitempty"`
	Started   time.Time `json:"started"`
	Log       string    `json:"log"`
}

// jobID names a job: operation, namespace and name joined by colons, which no Kubernetes name
// contains.
func jobID(op, namespace, name string) string { return op + ":" + namespace + ":" + name }

func parseJobID(id string) (op, namespace, name string, err error) {
	parts := strings.Split(id, ":")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return "", "", "", fmt.Errorf("%w %q: want <operation>:<namespace>:<name>", errBadJobID, id)
	}
	switch parts[0] {
	case opCreate, opDelete, opPowerOn, opPowerOff:
	default:
		return "", "", "", fmt.Errorf("%w %q: unknown operation %q", errBadJobID, id, parts[0])
	}
	return parts[0], parts[1], parts[2], nil
}

// errNoSuchJob: the objects show no such operation; errBadJobID: the ID is malformed.
var (
	errNoSuchJob = errors.New("no such job")
	errBadJobID  = errors.New("invalid job ID")
)

// jobOf derives job id from the claim it is about (nil when the claim is gone).
func jobOf(op string, namespace, name string, c *infrav1.MachineClaim) (Job, error) {
	j := Job{ID: jobID(op, namespace, name), Operation: op, Namespace: namespace, Name: name}
	j.Log = "/api/v1/jobs/" + j.ID + "/log"
	if c == nil {
		if op != opDelete {
			return j, errNoSuchJob
		}
		j.State, j.Message = JobSucceeded, "the VM and its MachineClaim are gone"
		return j, nil
	}
	j.Started = c.CreationTimestamp.Time
	ready := conditions.Get(c, infrav1.ReadyCondition)
	if ready != nil {
		j.Message = ready.Reason + ": " + ready.Message
	}
	switch op {
	case opCreate:
		switch c.Status.Phase {
		case infrav1.MachineClaimPhaseReady:
			j.State = JobSucceeded
		case infrav1.MachineClaimPhaseFailed:
			j.State = JobFailed
		default:
			j.State = JobRunning
		}
	case opDelete:
		if c.DeletionTimestamp.IsZero() {
			return j, errNoSuchJob
		}
		j.Started, j.State = c.DeletionTimestamp.Time, JobRunning
	case opPowerOn, opPowerOff:
		want := "Running"
		if op == opPowerOff {
			want = "Stopped"
		}
		j.State = JobRunning
		if strings.EqualFold(c.Status.PowerState, want) {
			j.State = JobSucceeded
		}
	}
	return j, nil
}

// getJob reads the claim a job is about, as the caller.
func getJob(ctx context.Context, c client.Client, id string) (Job, *infrav1.MachineClaim, error) {
	op, ns, name, err := parseJobID(id)
	if err != nil {
		return Job{}, nil, err
	}
	claim := &infrav1.MachineClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, claim); err != nil {
		if !apierrors.IsNotFound(err) {
			return Job{}, nil, err
		}
		claim = nil
	}
	j, err := jobOf(op, ns, name, claim)
	return j, claim, err
}

// listJobs lists the jobs of every claim the caller may see: its creation, and its deletion while
// it runs.
func (s *Server) listJobs(ctx context.Context, c client.Client, namespace string) ([]Job, error) {
	var jobs []Job
	err := listVisible(ctx, c, s.inventory.Namespaces(), namespace, func() *infrav1.MachineClaimList { return &infrav1.MachineClaimList{} },
		func(l *infrav1.MachineClaimList) {
			for i := range l.Items {
				claim := &l.Items[i]
				if j, err := jobOf(opCreate, claim.Namespace, claim.Name, claim); err == nil {
					jobs = append(jobs, j)
				}
				if j, err := jobOf(opDelete, claim.Namespace, claim.Name, claim); err == nil {
					jobs = append(jobs, j)
				}
			}
		})
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].Started.After(jobs[j].Started) })
	return jobs, err
}

// logLine is one line of a job's log with what makes it unique, so a line seen once is never
// sent again while the log streams.
type logLine struct {
	key  string
	at   time.Time
	text string
}

// logLines derives a job's log from the claim and its Events.
func logLines(claim *infrav1.MachineClaim, events []corev1.Event) []logLine {
	var lines []logLine
	add := func(key string, at time.Time, format string, args ...any) {
		lines = append(lines, logLine{key: key, at: at, text: fmt.Sprintf(format, args...)})
	}
	add("created", claim.CreationTimestamp.Time, "MachineClaim %s/%s created (template %s, cluster %s)",
		claim.Namespace, claim.Name, claimTemplate(claim), claimCluster(claim))
	for _, e := range events {
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		if at.IsZero() {
			at = e.CreationTimestamp.Time
		}
		add(fmt.Sprintf("event/%s/%d", e.UID, e.Count), at, "%s %s: %s", e.Type, e.Reason, e.Message)
	}
	for _, cond := range claim.Status.Conditions {
		if cond.Type == infrav1.PausedCondition && cond.Status == metav1.ConditionFalse {
			continue
		}
		msg := ""
		if cond.Message != "" {
			msg = ": " + cond.Message
		}
		add(fmt.Sprintf("condition/%s/%s/%s/%s", cond.Type, cond.Status, cond.Reason, cond.Message), cond.LastTransitionTime.Time,
			"condition %s=%s %s%s", cond.Type, cond.Status, cond.Reason, msg)
	}
	if t := claim.Status.Task; t != nil {
		add("task/"+t.ID, t.StartTime.Time, "hypervisor task %s on %s: %s", t.Operation, t.Node, t.ID)
	}
	if id := claimVMID(claim); id != "" {
		add("vm/"+claimHost(claim)+"/"+id, time.Time{}, "VM %s on host %s", id, claimHost(claim))
	}
	if claim.Status.Phase != "" {
		add("phase/"+string(claim.Status.Phase), time.Time{}, "phase %s", claim.Status.Phase)
	}
	if claim.Status.PowerState != "" {
		add("power/"+claim.Status.PowerState, time.Time{}, "power state %s", claim.Status.PowerState)
	}
	if len(claim.Status.Addresses) > 0 {
		var addrs []string
		for _, a := range claim.Status.Addresses {
			addrs = append(addrs, a.Address)
		}
		add("addresses/"+strings.Join(addrs, ","), time.Time{}, "addresses %s", strings.Join(addrs, ", "))
	}
	if !claim.DeletionTimestamp.IsZero() {
		add("deleting", claim.DeletionTimestamp.Time, "deletion requested: stopping and destroying the VM")
	}
	// Lines without a time of their own are the latest observation.
	now := time.Now()
	for i := range lines {
		if lines[i].at.IsZero() {
			lines[i].at = now
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at.Before(lines[j].at) })
	return lines
}

// claimEvents lists the Events about a claim (this incarnation of it), as the caller.
func claimEvents(ctx context.Context, c client.Client, claim *infrav1.MachineClaim) ([]corev1.Event, error) {
	var l corev1.EventList
	if err := c.List(ctx, &l, client.InNamespace(claim.Namespace),
		client.MatchingFields{"involvedObject.kind": "MachineClaim", "involvedObject.name": claim.Name}); err != nil {
		return nil, err
	}
	out := l.Items[:0]
	for _, e := range l.Items {
		if e.InvolvedObject.UID == "" || e.InvolvedObject.UID == claim.UID {
			out = append(out, e)
		}
	}
	return out, nil
}
