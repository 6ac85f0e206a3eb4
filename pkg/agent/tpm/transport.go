package tpm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/google/go-tpm/tpm2/transport"
	"github.com/google/go-tpm/tpm2/transport/linuxtpm"
)

// DefaultDevice is the kernel's TPM resource manager, which flushes our objects if we die.
const DefaultDevice = "/dev/tpmrm0"

// maxResponseSize bounds what we read from a TPM; real responses are a few KiB.
const maxResponseSize = 64 << 10

// tpmIOTimeout bounds one command over TCP; key generation in a software TPM takes well under it.
const tpmIOTimeout = 30 * time.Second

// Open opens the TPM at addr: a character device path (DefaultDevice when empty) or
// tcp://host:port of a TPM speaking raw TPM 2.0 commands, such as swtpm's server socket.
func Open(addr string) (transport.TPMCloser, error) {
	if addr == "" {
		addr = DefaultDevice
	}
	hostPort, ok := strings.CutPrefix(addr, "tcp://")
	if !ok {
		t, err := linuxtpm.Open(addr)
		if err != nil {
			return nil, fmt.Errorf("opening TPM %s: %w", addr, err)
		}
		return &lockedTPM{tpm: t}, nil
	}
	conn, err := net.DialTimeout("tcp", hostPort, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("connecting to TPM %s: %w", addr, err)
	}
	return &lockedTPM{tpm: &tcpTPM{conn: conn}}, nil
}

// lockedTPM serialises commands: the agent signs TLS handshakes from several goroutines.
type lockedTPM struct {
	mu  sync.Mutex
	tpm transport.TPMCloser
}

func (l *lockedTPM) Send(cmd []byte) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for attempt := 1; ; attempt++ {
		rsp, err := l.tpm.Send(cmd)
		if err != nil || attempt == maxRetries || !retryable(rsp) {
			return rsp, err
		}
		time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
	}
}

// maxRetries bounds resending a command the TPM asked us to retry.
const maxRetries = 10

// retryable reports the warnings after which TPM 2.0 (Part 2, 6.6.3) says to send the command
// again unchanged: TPM_RC_RETRY, TPM_RC_YIELDED and TPM_RC_TESTING. Software TPMs answer RETRY
// now and then to ECDSA signing.
func retryable(rsp []byte) bool {
	if len(rsp) < 10 {
		return false
	}
	switch binary.BigEndian.Uint32(rsp[6:10]) {
	case 0x922, 0x908, 0x90A:
		return true
	}
	return false
}

func (l *lockedTPM) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tpm.Close()
}

// tcpTPM sends raw commands over a stream. A response may arrive in several reads, so it reads
// the header first and then exactly the size the header announces.
type tcpTPM struct {
	conn net.Conn
}

func (t *tcpTPM) Send(cmd []byte) ([]byte, error) {
	if err := t.conn.SetDeadline(time.Now().Add(tpmIOTimeout)); err != nil {
		return nil, err
	}
	if _, err := t.conn.Write(cmd); err != nil {
		return nil, err
	}
	header := make([]byte, 10) // tag (2), size (4), response code (4)
	if _, err := io.ReadFull(t.conn, header); err != nil {
		return nil, fmt.Errorf("reading TPM response: %w", err)
	}
	size := binary.BigEndian.Uint32(header[2:6])
	if size < 10 || size > maxResponseSize {
		return nil, errors.New("TPM response has an invalid size")
	}
	rsp := make([]byte, size)
	copy(rsp, header)
	if _, err := io.ReadFull(t.conn, rsp[10:]); err != nil {
		return nil, fmt.Errorf("reading TPM response: %w", err)
	}
	return rsp, nil
}

func (t *tcpTPM) Close() error { return t.conn.Close() }
