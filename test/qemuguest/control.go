package qemuguest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// QMP runs one QMP command on a QEMU monitor socket: the greeting, qmp_capabilities, then
// the command, whose "return" it gives back.
func QMP(ctx context.Context, socket, command string, args any) (json.RawMessage, error) {
	conn, err := dialUnix(ctx, socket)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	r := bufio.NewReader(conn)
	if _, err := r.ReadBytes('\n'); err != nil { // {"QMP": {...}} greeting
		return nil, fmt.Errorf("QMP greeting: %w", err)
	}
	if _, err := qmpExchange(conn, r, "qmp_capabilities", nil); err != nil {
		return nil, err
	}
	return qmpExchange(conn, r, command, args)
}

// qmpExchange sends one command and reads until its answer, skipping asynchronous events.
func qmpExchange(conn net.Conn, r *bufio.Reader, command string, args any) (json.RawMessage, error) {
	req := map[string]any{"execute": command}
	if args != nil {
		req["arguments"] = args
	}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return nil, err
	}
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			if command == "quit" && len(bytes.TrimSpace(line)) == 0 {
				return nil, nil // QEMU may close the socket before it answers quit
			}
			return nil, fmt.Errorf("QMP %s: %w", command, err)
		}
		var msg struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
			Event string `json:"event"`
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			return nil, fmt.Errorf("QMP %s: %w", command, err)
		}
		switch {
		case msg.Event != "":
			continue
		case msg.Error != nil:
			return nil, fmt.Errorf("QMP %s: %s: %s", command, msg.Error.Class, msg.Error.Desc)
		default:
			return msg.Return, nil
		}
	}
}

// ErrAgentNotRunning is what QGA returns when the guest agent does not answer (qemu-server's words
// for it).
var ErrAgentNotRunning = errors.New("QEMU guest agent is not running")

// QGA runs one command on the guest's qemu-guest-agent through its virtio-serial chardev.
// The channel is a byte stream that may hold a previous client's leftovers, so every exchange
// starts with guest-sync-delimited, as qemu-server does: the agent answers it after a 0xFF byte,
// and everything before is discarded.
func QGA(ctx context.Context, socket, command string, args any) (json.RawMessage, error) {
	conn, err := dialUnix(ctx, socket)
	if err != nil {
		return nil, ErrAgentNotRunning
	}
	defer func() { _ = conn.Close() }()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	_ = conn.SetDeadline(deadline)
	var idb [4]byte
	_, _ = rand.Read(idb[:])
	id := int64(binary.BigEndian.Uint32(idb[:]) >> 1)
	// 0xFF first tells the agent to drop any partial command it holds.
	if _, err := conn.Write([]byte{0xff}); err != nil {
		return nil, ErrAgentNotRunning
	}
	if err := json.NewEncoder(conn).Encode(map[string]any{"execute": "guest-sync-delimited", "arguments": map[string]any{"id": id}}); err != nil {
		return nil, ErrAgentNotRunning
	}
	r := bufio.NewReader(conn)
	for {
		if _, err := r.ReadBytes(0xff); err != nil {
			return nil, ErrAgentNotRunning
		}
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil, ErrAgentNotRunning
		}
		var sync struct {
			Return int64 `json:"return"`
		}
		if json.Unmarshal(line, &sync) == nil && sync.Return == id {
			break
		}
	}
	req := map[string]any{"execute": command}
	if args != nil {
		req["arguments"] = args
	}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return nil, ErrAgentNotRunning
	}
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("guest agent %s: %w", command, err)
	}
	var msg struct {
		Return json.RawMessage `json:"return"`
		Error  *struct {
			Class string `json:"class"`
			Desc  string `json:"desc"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &msg); err != nil {
		return nil, fmt.Errorf("guest agent %s: %w", command, err)
	}
	if msg.Error != nil {
		return nil, fmt.Errorf("Agent error: %s", msg.Error.Desc)
	}
	return msg.Return, nil
}

func dialUnix(ctx context.Context, socket string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", socket)
}

// IPv4Addresses asks the guest agent for the guest's IPv4 addresses (guest-network-get-interfaces),
// loopback left out.
func IPv4Addresses(ctx context.Context, qga string) ([]string, error) {
	out, err := QGA(ctx, qga, "guest-network-get-interfaces", nil)
	if err != nil {
		return nil, err
	}
	var ifaces []struct {
		Name        string `json:"name"`
		IPAddresses []struct {
			Type    string `json:"ip-address-type"`
			Address string `json:"ip-address"`
		} `json:"ip-addresses"`
	}
	if err := json.Unmarshal(out, &ifaces); err != nil {
		return nil, fmt.Errorf("guest-network-get-interfaces: %w", err)
	}
	var addrs []string
	for _, i := range ifaces {
		if i.Name == "lo" {
			continue
		}
		for _, a := range i.IPAddresses {
			if a.Type == "ipv4" && !strings.HasPrefix(a.Address, "127.") {
				addrs = append(addrs, a.Address)
			}
		}
	}
	return addrs, nil
}
