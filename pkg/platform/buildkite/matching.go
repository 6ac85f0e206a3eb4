package buildkite

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// DefaultQueue is the queue of a job without a queue rule and of an agent without a queue tag.
const DefaultQueue = "default"

// Tags are an agent's tags: key=value pairs, the queue among them.
type Tags map[string]string

// ParseTags parses key=value strings (an agent's meta_data or a job's agent_query_rules).
// Keys are trimmed and must not be empty; a later duplicate key wins.
func ParseTags(list []string) (Tags, error) {
	t := Tags{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("tag %q is not key=value", kv)
		}
		t[k] = strings.TrimSpace(v)
	}
	return t, nil
}

// Queue is the queue tag, or DefaultQueue.
func (t Tags) Queue() string {
	if q := t["queue"]; q != "" {
		return q
	}
	return DefaultQueue
}

// Strings returns the tags as sorted key=value strings, the form buildkite-agent --tags takes
// (comma-joined) and the agent API reports.
func (t Tags) Strings() []string {
	out := make([]string, 0, len(t))
	for k, v := range t {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// AgentTags are the tags a pool's agents start with: the pool's tags with its queue.
func AgentTags(queue string, tags map[string]string) Tags {
	t := Tags{}
	for k, v := range tags {
		t[k] = v
	}
	if queue != "" {
		t["queue"] = queue
	}
	return t
}

// Matches reports whether an agent with these tags may run a job with rules, as Buildkite
// dispatches: the job's queue (its queue rule, or the default queue) must be the agent's queue,
// and every other rule key=value must be among the agent's tags, where the value may be a
// pattern with * (e.g. os=linux*, gpu=*). Malformed rules match nothing.
func (t Tags) Matches(rules []string) bool {
	r, err := ParseTags(rules)
	if err != nil || r.Queue() != t.Queue() {
		return false
	}
	for k, want := range r {
		if k == "queue" {
			continue
		}
		have, ok := t[k]
		if !ok {
			return false
		}
		if matched, err := path.Match(want, have); err != nil || !matched {
			return false
		}
	}
	return true
}
