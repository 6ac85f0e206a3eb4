package console

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// Job log streaming.
const (
	logPollInterval = 500 * time.Millisecond
	// maxLogStream ends a stream that runs this long; the client reconnects if it still cares.
	maxLogStream = 30 * time.Minute
	heartbeat    = 15 * time.Second
)

// getJobLog streams a job's log as server-sent events: a "log" event per line (conditions,
// Events, hypervisor tasks, power state), then an "end" event with the job's final state. The log
// is derived from the objects each time, so it survives a console restart; a reconnecting client
// gets the lines again from the start.
func (s *Server) getJobLog(w http.ResponseWriter, r *http.Request, c *caller) {
	ctx := r.Context()
	j, claim, err := getJob(ctx, c.Client, r.PathValue("id"))
	if !s.jobError(w, r, err) {
		return
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	sent := map[string]bool{}
	seq := 0
	write := func(event, data string) bool {
		// The server's write timeout is for ordinary requests; a stream extends its own.
		_ = rc.SetWriteDeadline(time.Now().Add(time.Minute))
		seq++
		if _, err := w.Write([]byte(formatEvent(seq, event, data))); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	emit := func(claim *v1alpha1.MachineClaim) bool {
		events, err := claimEvents(ctx, c.Client, claim)
		if err != nil {
			// Events are a bonus: a person who may read the claim but not Events still gets the rest.
			events = nil
		}
		for _, l := range logLines(claim, events) {
			if sent[l.key] {
				continue
			}
			sent[l.key] = true
			if !write("log", l.at.UTC().Format(time.RFC3339)+" "+l.text) {
				return false
			}
		}
		return true
	}
	deadline := time.After(maxLogStream)
	lastWrite := time.Now()
	for {
		if claim != nil {
			if !emit(claim) {
				return
			}
			lastWrite = time.Now()
		}
		if j.State != JobRunning {
			if claim == nil {
				write("log", time.Now().UTC().Format(time.RFC3339)+" "+j.Message)
			}
			write("end", fmt.Sprintf(`{"state":%q}`, j.State))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-s.shuttingDown:
			// No end event: the browser's EventSource reconnects to the next console, which
			// derives the same log again.
			return
		case <-deadline:
			write("end", `{"state":"Running","detail":"stream time limit reached; reconnect to follow"}`)
			return
		case <-time.After(logPollInterval):
		}
		if time.Since(lastWrite) > heartbeat {
			_, _ = w.Write([]byte(": keep-alive\n\n"))
			_ = rc.Flush()
			lastWrite = time.Now()
		}
		if j, claim, err = getJob(ctx, c.Client, j.ID); err != nil {
			write("end", fmt.Sprintf(`{"state":"Unknown","detail":%q}`, err.Error()))
			return
		}
	}
}

// lineBreaks are the ends of line of the event stream format: CRLF, CR and LF alike.
var lineBreaks = strings.NewReplacer("\r\n", "\n", "\r", "\n")

// formatEvent writes one server-sent event. Each line of data gets a data field of its own, split
// at every end of line a browser's EventSource knows: a CR left inside a field would end it there,
// and a message (an Event's, which anyone who may create Events writes) could then add fields of
// its own, such as "event: end" or a new id.
func formatEvent(id int, event, data string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "id: %d\nevent: %s\n", id, event)
	for _, line := range strings.Split(lineBreaks.Replace(data), "\n") {
		fmt.Fprintf(&b, "data: %s\n", line)
	}
	b.WriteString("\n")
	return b.String()
}
