package console

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// sseEvent is an event as a browser's EventSource dispatches it.
type sseEvent struct {
	ID, Type, Data string
}

// parseEventStream reads a stream as the HTML standard's event stream interpretation does: lines
// end at CRLF, CR or LF; a blank line dispatches the event; "field: value" sets a field.
func parseEventStream(stream string) []sseEvent {
	var out []sseEvent
	var cur sseEvent
	var data []string
	lines := strings.Split(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(stream), "\n")
	for _, line := range lines {
		if line == "" {
			if data != nil {
				cur.Data = strings.Join(data, "\n")
				if cur.Type == "" {
					cur.Type = "message"
				}
				out = append(out, cur)
			}
			id := cur.ID
			cur, data = sseEvent{ID: id}, nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			cur.Type = value
		case "data":
			data = append(data, value)
		case "id":
			cur.ID = value
		}
	}
	return out
}

// TestLogEventsCannotInjectFields plays a person who may create Events in a namespace and writes
// an Event message with a bare CR followed by an event stream field: whoever follows the job's log
// must get one "log" event whose data is the message (its line breaks as LF), never a forged end,
// event type, id or extra event.
func TestLogEventsCannotInjectFields(t *testing.T) {
	for _, tc := range []struct {
		name, message, want string
	}{
		{"plain", "Cloning 9000", "Cloning 9000"},
		{"LF", "one\ntwo", "one\ntwo"},
		{"CR then a data field", "Cloning\rdata: forged", "Cloning\ndata: forged"},
		{"CR then an event field", "Cloning\revent: end", "Cloning\nevent: end"},
		{"CR then an id field", "Cloning\rid: 999", "Cloning\nid: 999"},
		{"CRLF then an event field", "Cloning\r\nevent: x", "Cloning\nevent: x"},
		{"CR CR: a blank line would end the event", "Cloning\r\revent: end\rdata: {\"state\":\"Succeeded\"}",
			"Cloning\n\nevent: end\ndata: {\"state\":\"Succeeded\"}"},
		{"LF CR", "Cloning\n\revent: x", "Cloning\n\nevent: x"},
		{"trailing CR", "Cloning\r", "Cloning\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			stream := formatEvent(7, "log", tc.message) + formatEvent(8, "end", `{"state":"Running"}`)
			g.Expect(parseEventStream(stream)).To(Equal([]sseEvent{
				{ID: "7", Type: "log", Data: tc.want},
				{ID: "8", Type: "end", Data: `{"state":"Running"}`},
			}))
			g.Expect(stream).NotTo(ContainSubstring("\r"))
		})
	}
}
