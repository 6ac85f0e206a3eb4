package hyperv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The module writes its answers with Windows PowerShell 5.1's ConvertTo-Json and is careful to
// force arrays, cast enums and format dates itself. The decoder still accepts what 5.1 emits when
// that care is missing somewhere (an older module, a value a cmdlet hands through): a scalar where
// an array was expected (the pipeline unwraps one-element arrays), null for an empty array, an
// enum's name instead of its number, a date as "/Date(ms)/" or as an ETS-decorated object, and a
// TimeSpan as an object.

// envelope is every module function's answer.
type envelope struct {
	Ok      bool
	Class   string
	Message string
	Data    json.RawMessage
}

// psList is an array that PowerShell 5.1 may have unwrapped to its only element, or written as null.
type psList[T any] []T

func (l *psList[T]) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*l = nil
		return nil
	case len(b) > 0 && b[0] == '[':
		var items []T
		if err := json.Unmarshal(b, &items); err != nil {
			return err
		}
		*l = items
		return nil
	default:
		var one T
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*l = psList[T]{one}
		return nil
	}
}

// psTime is a date written as ISO 8601 (what the module writes), as 5.1's "/Date(ms)/" or
// "/Date(ms+hhmm)/", or as an ETS-decorated object {"value": ..., "DateTime": ...}.
type psTime struct{ time.Time }

var msDate = regexp.MustCompile(`^/Date\((-?\d+)([+-]\d{4})?\)/$`)

func (t *psTime) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		t.Time = time.Time{}
		return nil
	}
	if len(b) > 0 && b[0] == '{' {
		var decorated struct{ Value json.RawMessage }
		if err := json.Unmarshal(b, &decorated); err != nil {
			return err
		}
		if decorated.Value == nil {
			return errors.New("date object has no value")
		}
		return t.UnmarshalJSON(decorated.Value)
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("date: %w", err)
	}
	parsed, err := parsePSTime(s)
	if err != nil {
		return err
	}
	t.Time = parsed
	return nil
}

func parsePSTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if m := msDate.FindStringSubmatch(s); m != nil {
		ms, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("date %q: %w", s, err)
		}
		// The offset only says which zone the value was taken in; the milliseconds are UTC.
		return time.UnixMilli(ms).UTC(), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.9999999", "2006-01-02T15:04:05"} {
		if parsed, err := time.Parse(layout, s); err == nil {
			return parsed.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("date %q is neither ISO 8601 nor /Date(ms)/", s)
}

// psSeconds is a duration in seconds, written as a number or, when a TimeSpan slipped through
// unconverted, as its object form.
type psSeconds int64

func (s *psSeconds) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var span struct {
			Ticks        *int64
			TotalSeconds *float64
		}
		if err := json.Unmarshal(b, &span); err != nil {
			return err
		}
		switch {
		case span.Ticks != nil:
			*s = psSeconds(*span.Ticks / 10_000_000)
		case span.TotalSeconds != nil:
			*s = psSeconds(*span.TotalSeconds)
		}
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("seconds: %w", err)
	}
	*s = psSeconds(f)
	return nil
}

// VMState is Hyper-V's Microsoft.HyperV.PowerShell.VMState, which 5.1 writes as its number.
type VMState int

// The VMState values HyperFleet acts on (the rest map to Unknown).
const (
	VMStateOther        VMState = 1
	VMStateRunning      VMState = 2
	VMStateOff          VMState = 3
	VMStateStopping     VMState = 4
	VMStateSaved        VMState = 6
	VMStatePaused       VMState = 9
	VMStateStarting     VMState = 10
	VMStateReset        VMState = 11
	VMStateSaving       VMState = 32773
	VMStatePausing      VMState = 32776
	VMStateResuming     VMState = 32777
	VMStateFastSaved    VMState = 32779
	VMStateFastSaving   VMState = 32780
	VMStateForceOff     VMState = 32781
	VMStateForceReboot  VMState = 32782
	vmStateCriticalLow  VMState = 32783
	vmStateCriticalHigh VMState = 32794
)

var vmStateNames = map[string]VMState{
	"other": VMStateOther, "running": VMStateRunning, "off": VMStateOff, "stopping": VMStateStopping,
	"saved": VMStateSaved, "paused": VMStatePaused, "starting": VMStateStarting, "reset": VMStateReset,
	"saving": VMStateSaving, "pausing": VMStatePausing, "resuming": VMStateResuming,
	"fastsaved": VMStateFastSaved, "fastsaving": VMStateFastSaving,
}

func (s *VMState) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var name string
		if err := json.Unmarshal(b, &name); err != nil {
			return err
		}
		if n, err := strconv.Atoi(name); err == nil {
			*s = VMState(n)
			return nil
		}
		v, ok := vmStateNames[strings.ToLower(name)]
		if !ok {
			return fmt.Errorf("unknown VM state %q", name)
		}
		*s = v
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("VM state: %w", err)
	}
	*s = VMState(n)
	return nil
}

// wireVM is one VM as the module describes it.
type wireVM struct {
	ID                  string `json:"Id"`
	Name                string
	State               VMState
	Notes               string
	Generation          int
	ProcessorCount      int
	MemoryStartupBytes  int64
	MemoryAssignedBytes int64
	UptimeSeconds       psSeconds
	CreationTime        psTime
	IPAddresses         psList[string]
	MacAddresses        psList[string]
	SwitchName          string
	VlanID              int `json:"VlanId"`
	DvdPaths            psList[string]
	HardDiskPaths       psList[string]
	// Merging: Hyper-V is merging a removed checkpoint's disk.
	Merging bool
	// Migrating: the VM is moving to another host.
	Migrating bool
}

// wireHost is a host's capacity.
type wireHost struct {
	Name              string
	Version           string
	LogicalProcessors int
	MemoryBytes       int64
	FreeMemoryBytes   int64
}

type wireInventory struct {
	Host wireHost
	VMs  psList[wireVM]
}

type wireTemplate struct {
	Kind               string
	ID                 string `json:"Id"`
	Name               string
	Tags               string
	VHDPath            string
	SizeBytes          int64
	ProcessorCount     int
	MemoryStartupBytes int64
}

type wireTemplates struct{ Templates psList[wireTemplate] }

type wireOneVM struct {
	Created bool
	VM      wireVM
}

// moduleProbe is what the version probe reports about the module installed on a host.
type moduleProbe struct {
	Version string
	Sha256  string
}

// decodeEnvelope reads a module function's answer: the JSON at the end of stdout. Output before it
// (a profile's, a cmdlet's stray line) is skipped, and a line break a host inserted into the long
// line is removed: the compressed JSON itself holds none.
func decodeEnvelope(stdout string) (envelope, error) {
	var env envelope
	lines := strings.Split(strings.ReplaceAll(strings.TrimSpace(stdout), "\r\n", "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), "{") {
			continue
		}
		if err := json.Unmarshal([]byte(strings.Join(lines[i:], "")), &env); err == nil {
			return env, nil
		}
	}
	if strings.TrimSpace(stdout) == "" {
		return env, errors.New("the module wrote no answer")
	}
	return env, fmt.Errorf("the module's answer is not JSON: %.200q", stdout)
}
