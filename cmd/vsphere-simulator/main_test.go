package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/vsphere"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestTheCommandServesAVCenter starts the command on a free port and connects HyperFleet's
// provider to it with the printed endpoint, the account and the CA it wrote.
func TestTheCommandServesAVCenter(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	var out, errs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--hosts", "2", "--user", "hf@vsphere.local=pw", "--ca-out", caFile}, &out, &errs)
	}()
	printed := regexp.MustCompile(`at (https://127\.0\.0\.1:\d+) `)
	var url string
	for deadline := time.Now().Add(20 * time.Second); url == ""; time.Sleep(20 * time.Millisecond) {
		if m := printed.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing printed: %q %q", out.String(), errs.String())
		}
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := vsphere.New(vsphere.Config{Endpoint: url, Username: "hf@vsphere.local", Password: "pw", CABundle: ca,
		Cluster: "ns/vc", InstallationID: "inst0000a"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	nodes, err := p.Nodes(ctx)
	if err != nil || len(nodes) != 2 {
		t.Fatalf("nodes: %+v %v", nodes, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
