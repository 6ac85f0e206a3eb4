package pvesim

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/qemuguest"
)

// qgaTimeout bounds one guest agent exchange, as qemu-server's agent commands are bounded.
const qgaTimeout = 10 * time.Second

// qgaSocket runs qemu-server's assert_agent_available for a QEMU guest and returns the socket of
// its agent channel.
func (s *Simulator) qgaSocket(rq *request) (string, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, err := s.vmOnNode(rq.p.get("node"), rq.vmid())
	if err != nil {
		return "", err
	}
	if _, ok := vm.conf["agent"]; !ok {
		return "", errf("No QEMU guest agent configured")
	}
	if vm.status != "running" {
		return "", errf("VM %d is not running", vm.vmid)
	}
	b := s.boots[vm.vmid]
	if !agentEnabled(vm) || b == nil || b.qemu == nil {
		return "", errf("QEMU guest agent is not running")
	}
	return b.qemu.qga, nil
}

// qgaCall forwards one guest agent command to a QEMU guest's qemu-guest-agent.
func (s *Simulator) qgaCall(rq *request, command string, args any) (json.RawMessage, *apiError) {
	socket, aerr := s.qgaSocket(rq)
	if aerr != nil {
		return nil, aerr
	}
	ctx, cancel := context.WithTimeout(rq.r.Context(), qgaTimeout)
	defer cancel()
	out, err := qemuguest.QGA(ctx, socket, command, args)
	if err != nil {
		return nil, errf("%s", err.Error())
	}
	return out, nil
}

// qgaResult is a guest agent answer as qemu-server's agent endpoints return it: {"result": ...}.
func (s *Simulator) qgaResult(rq *request, command string) (any, *apiError) {
	out, err := s.qgaCall(rq, command, nil)
	if err != nil {
		return nil, err
	}
	return map[string]any{"result": out}, nil
}

// qgaExec is agent/exec for a QEMU guest: guest-exec with its output captured.
func (s *Simulator) qgaExec(rq *request) (any, *apiError) {
	raw, _ := rq.p.str("command")
	var command []string
	if raw != "" {
		command = strings.Split(raw, "\x00")
	}
	if len(command) == 0 {
		return nil, paramErr(map[string]string{"command": "property is missing and it is not optional"})
	}
	args := map[string]any{"path": command[0], "arg": command[1:], "capture-output": true}
	if in, ok := rq.p.str("input-data"); ok && in != "" {
		args["input-data"] = base64.StdEncoding.EncodeToString([]byte(in))
	}
	out, err := s.qgaCall(rq, "guest-exec", args)
	if err != nil {
		return nil, err
	}
	var res struct {
		PID int `json:"pid"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		return nil, errf("Agent error: %s", jerr.Error())
	}
	return map[string]any{"pid": res.PID}, nil
}

// qgaExecStatus is agent/exec-status for a QEMU guest: qemu-server turns the agent's booleans into
// 0/1 and decodes the captured output.
func (s *Simulator) qgaExecStatus(rq *request) (any, *apiError) {
	out, aerr := s.qgaCall(rq, "guest-exec-status", map[string]any{"pid": atoiOr(rq.p.get("pid"), 0)})
	if aerr != nil {
		return nil, aerr
	}
	var st struct {
		Exited       bool   `json:"exited"`
		ExitCode     *int   `json:"exitcode"`
		Signal       *int   `json:"signal"`
		OutData      string `json:"out-data"`
		ErrData      string `json:"err-data"`
		OutTruncated bool   `json:"out-truncated"`
		ErrTruncated bool   `json:"err-truncated"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return nil, errf("Agent error: %s", err.Error())
	}
	res := map[string]any{"exited": boolInt(st.Exited)}
	if st.ExitCode != nil {
		res["exitcode"] = *st.ExitCode
	}
	if st.Signal != nil {
		res["signal"] = *st.Signal
	}
	for key, data := range map[string]string{"out-data": st.OutData, "err-data": st.ErrData} {
		if data == "" {
			continue
		}
		if dec, err := base64.StdEncoding.DecodeString(data); err == nil {
			res[key] = string(dec)
		}
	}
	if st.OutTruncated {
		res["out-truncated"] = 1
	}
	if st.ErrTruncated {
		res["err-truncated"] = 1
	}
	return res, nil
}
