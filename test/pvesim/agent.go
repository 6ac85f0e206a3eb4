package pvesim

import (
	"strings"
	"time"
)

// agentVM runs qemu-server's assert_agent_available for an agent command.
func (s *Simulator) agentVM(rq *request) (*vmState, *apiError) {
	vm, err := s.vmOnNode(rq.p.get("node"), rq.vmid())
	if err != nil {
		return nil, err
	}
	if _, ok := vm.conf["agent"]; !ok {
		return nil, errf("No QEMU guest agent configured")
	}
	if vm.status != "running" {
		return nil, errf("VM %d is not running", vm.vmid)
	}
	if !agentEnabled(vm) || time.Since(vm.startedAt) < s.cfg.BootDelay {
		return nil, errf("QEMU guest agent is not running")
	}
	return vm, nil
}

// agentNetwork answers guest-network-get-interfaces: lo plus eth0 with the
// VM's address from 10.77.0.0/16 and net0's MAC, or, for a guest that applied a
// network-config, the interfaces it configured (guestInterfaces).
func (s *Simulator) agentNetwork(rq *request) (any, *apiError) {
	if s.qemu != nil {
		return s.qgaResult(rq, "guest-network-get-interfaces")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, err := s.agentVM(rq)
	if err != nil {
		return nil, err
	}
	mac := "00:00:00:00:00:00"
	if net0, ok := vm.conf["net0"]; ok {
		for _, part := range strings.Split(net0, ",") {
			if _, v, ok := strings.Cut(part, "="); ok && macRe.MatchString(v) {
				mac = strings.ToLower(v)
				break
			}
		}
	}
	stats := map[string]any{"rx-bytes": 4096, "rx-dropped": 0, "rx-errs": 0, "rx-packets": 32,
		"tx-bytes": 2048, "tx-dropped": 0, "tx-errs": 0, "tx-packets": 16}
	lo := map[string]any{
		"name": "lo", "hardware-address": "00:00:00:00:00:00",
		"ip-addresses": []map[string]any{
			{"ip-address-type": "ipv4", "ip-address": "127.0.0.1", "prefix": 8},
			{"ip-address-type": "ipv6", "ip-address": "::1", "prefix": 128},
		},
		"statistics": stats,
	}
	if len(vm.guestNICs) > 0 {
		return map[string]any{"result": append([]map[string]any{lo}, s.guestInterfaces(vm, stats)...)}, nil
	}
	ifaces := []map[string]any{
		lo,
		{
			"name": "eth0", "hardware-address": mac,
			"ip-addresses": []map[string]any{
				{"ip-address-type": "ipv4", "ip-address": vm.ip, "prefix": 16},
				{"ip-address-type": "ipv6", "ip-address": linkLocal(mac), "prefix": 64},
			},
			"statistics": stats,
		},
	}
	return map[string]any{"result": ifaces}, nil
}

// linkLocal derives the EUI-64 IPv6 link-local address of a MAC.
func linkLocal(mac string) string {
	var b [6]byte
	parts := strings.Split(mac, ":")
	for i := 0; i < 6 && i < len(parts); i++ {
		var v byte
		for _, c := range parts[i] {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= byte(c - '0')
			case c >= 'a' && c <= 'f':
				v |= byte(c-'a') + 10
			}
		}
		b[i] = v
	}
	b[0] ^= 2
	return strings.ToLower(
		"fe80::" + hex2(b[0], b[1]) + ":" + hex2(b[2], 0xff) + ":" + hex2(0xfe, b[3]) + ":" + hex2(b[4], b[5]))
}

func hex2(a, b byte) string {
	const digits = "0123456789abcdef"
	s := string([]byte{digits[a>>4], digits[a&15], digits[b>>4], digits[b&15]})
	s = strings.TrimLeft(s, "0")
	if s == "" {
		return "0"
	}
	return s
}

func (s *Simulator) agentHostName(rq *request) (any, *apiError) {
	if s.qemu != nil {
		return s.qgaResult(rq, "guest-get-host-name")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, err := s.agentVM(rq)
	if err != nil {
		return nil, err
	}
	name := vm.conf["name"]
	if name == "" {
		name = "vm" + vmidStr(vm.vmid)
	}
	return map[string]any{"result": map[string]any{"host-name": name}}, nil
}

func (s *Simulator) agentOSInfo(rq *request) (any, *apiError) {
	if s.qemu != nil {
		return s.qgaResult(rq, "guest-get-osinfo")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.agentVM(rq); err != nil {
		return nil, err
	}
	return map[string]any{"result": map[string]any{
		"id": "ubuntu", "name": "Ubuntu", "pretty-name": "Ubuntu 24.04.2 LTS", "version": "24.04.2 LTS (Noble Numbat)",
		"version-id": "24.04", "kernel-release": "6.8.0-60-generic", "kernel-version": "#63-Ubuntu SMP", "machine": "x86_64",
	}}, nil
}

func (s *Simulator) agentPing(rq *request) (any, *apiError) {
	if s.qemu != nil {
		return s.qgaResult(rq, "guest-ping")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.agentVM(rq); err != nil {
		return nil, err
	}
	return map[string]any{"result": map[string]any{}}, nil
}
