package spire

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	agentv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/agent/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/spire/spiretest"
)

var td = spiffeid.RequireTrustDomainFromString("hyperfleet.test")

// TestProvisionerWithRealSPIRE runs a real spire-server and real spire-agents against the join
// tokens and registration entries the Provisioner creates.
func TestProvisionerWithRealSPIRE(t *testing.T) {
	serverBin, agentBin := spiretest.Bins(t)
	top := t
	dir := t.TempDir()
	server := spiretest.StartServer(t, serverBin, dir, td)

	// The workload in these tests is the test process itself, so the entry selects its uid.
	p, err := NewProvisioner(withTimeout(t, 5*time.Second), Config{
		Address:   server.Address,
		Selectors: []string{spiretest.UIDSelectorString()},
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = p.Close() })

	var bundle []byte
	NewWithT(t).Eventually(func() error {
		bundle, err = p.TrustBundlePEM(withTimeout(t, 2*time.Second))
		return err
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "spire-server did not come up")

	t.Run("trust bundle is the server's X.509 authority", func(t *testing.T) {
		g := NewWithT(t)
		block, _ := pem.Decode(bundle)
		g.Expect(block).NotTo(BeNil())
		ca, err := x509.ParseCertificate(block.Bytes)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ca.IsCA).To(BeTrue())
		g.Expect(ca.URIs).To(ContainElement(HaveField("Host", td.Name())))
	})

	machine := identity.Machine{Namespace: "runners", Name: "runner-a", BootstrapConfig: "runner-a-bc"}
	var cred identity.Credential
	t.Run("provision creates a join token and the machine's registration entry", func(t *testing.T) {
		g := NewWithT(t)
		before := time.Now()
		cred, err = p.Provision(withTimeout(t, 5*time.Second), td, machine, 2*time.Minute)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cred.ID.String()).To(Equal("spiffe://hyperfleet.test/hyperfleet/machine/runners/runner-a"))
		g.Expect(cred.JoinToken).NotTo(BeEmpty())
		g.Expect(cred.TokenHash).To(BeEmpty(), "SPIRE keeps the token; the API server keeps nothing")
		g.Expect(cred.ExpiresAt).To(BeTemporally("~", before.Add(2*time.Minute), 5*time.Second))

		agentID, _ := AgentID(td, cred.JoinToken)
		entries := server.Entries(t, cred.ID)
		g.Expect(entries).To(HaveLen(1))
		g.Expect(entries[0].ParentId).To(And(HaveField("TrustDomain", td.Name()), HaveField("Path", agentID.Path())))
		g.Expect(entries[0].Selectors).To(ConsistOf(And(HaveField("Type", "unix"), HaveField("Value", fmt.Sprintf("uid:%d", os.Getuid())))))
	})

	t.Run("an agent attests once with the token and its workload gets the machine's SVID", func(t *testing.T) {
		g := NewWithT(t)
		conf, workloadAPI := spiretest.AgentConfig(t, filepath.Join(dir, "agent-1"), server, cred.JoinToken, bundle)
		spiretest.Start(top, "spire-agent-1", agentBin, "run", "-config", conf) // later subtests use its Workload API

		agentID, _ := AgentID(td, cred.JoinToken)
		g.Eventually(func() []string { return server.AgentIDs(t) }, 30*time.Second, 250*time.Millisecond).
			Should(ContainElement(agentID.String()), "the server lists the attested agent")
		g.Eventually(func() (string, error) {
			svid, err := workloadapi.FetchX509SVID(withTimeout(t, 2*time.Second), workloadapi.WithAddr(workloadAPI))
			if err != nil {
				return "", err
			}
			return svid.ID.String(), nil
		}, 30*time.Second, 250*time.Millisecond).Should(Equal(cred.ID.String()))
		g.Expect(p.Redeemed(withTimeout(t, 5*time.Second), td, machine)).To(BeTrue(), "the token was spent by an agent")
	})

	t.Run("over TCP the manager authenticates with its own admin SVID", func(t *testing.T) {
		g := NewWithT(t)
		// The manager's SVID comes from a spire-agent of its own, as in a cluster.
		token, err := p.agents.CreateJoinToken(withTimeout(t, 5*time.Second), &agentv1.CreateJoinTokenRequest{Ttl: 60})
		g.Expect(err).NotTo(HaveOccurred())
		parent, _ := AgentID(td, token.Value)
		manager := &types.Entry{
			SpiffeId:  &types.SPIFFEID{TrustDomain: td.Name(), Path: "/hyperfleet/manager"},
			ParentId:  &types.SPIFFEID{TrustDomain: td.Name(), Path: parent.Path()},
			Selectors: []*types.Selector{{Type: "unix", Value: fmt.Sprintf("uid:%d", os.Getuid())}},
			Admin:     true,
		}
		g.Expect(p.createEntry(withTimeout(t, 5*time.Second), manager)).To(Succeed())
		conf, workloadAPI := spiretest.AgentConfig(t, filepath.Join(dir, "agent-manager"), server, token.Value, bundle)
		spiretest.Start(t, "spire-agent-manager", agentBin, "run", "-config", conf)

		tcp, err := NewProvisioner(withTimeout(t, 20*time.Second), Config{
			Address: fmt.Sprintf("127.0.0.1:%d", server.Port), Dial: DialOptions{WorkloadAPIAddress: workloadAPI}})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = tcp.Close() })
		g.Expect(tcp.TrustBundlePEM(withTimeout(t, 5*time.Second))).To(Equal(bundle))
		got, err := tcp.Provision(withTimeout(t, 5*time.Second), td, identity.Machine{Namespace: "runners", Name: "runner-tcp"}, time.Minute)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(server.Entries(t, got.ID)).To(HaveLen(1))
	})

	t.Run("over TCP a workload that is not an admin is refused", func(t *testing.T) {
		g := NewWithT(t)
		// agent-1 serves only the machine's SVID.
		tcp, err := NewProvisioner(withTimeout(t, 20*time.Second), Config{
			Address: fmt.Sprintf("127.0.0.1:%d", server.Port),
			Dial:    DialOptions{WorkloadAPIAddress: "unix://" + filepath.Join(dir, "agent-1", "workload.sock")}})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = tcp.Close() })
		_, err = tcp.Provision(withTimeout(t, 5*time.Second), td, identity.Machine{Namespace: "runners", Name: "runner-x"}, time.Minute)
		g.Expect(errors.Is(err, ErrPermissionDenied)).To(BeTrue(), "%v", err)
	})

	t.Run("a second agent with the same token is refused", func(t *testing.T) {
		g := NewWithT(t)
		conf, _ := spiretest.AgentConfig(t, filepath.Join(dir, "agent-2"), server, cred.JoinToken, bundle)
		agent := spiretest.Start(t, "spire-agent-2", agentBin, "run", "-config", conf)
		// spire-agent keeps retrying with backoff; the server's first answer is the refusal.
		g.Eventually(agent.Log, 20*time.Second, 200*time.Millisecond).
			Should(ContainSubstring("join token does not exist or has already been used"))
		agentID, _ := AgentID(td, cred.JoinToken)
		g.Expect(countOf(server.AgentIDs(t), agentID.String())).To(Equal(1))
	})

	t.Run("an expired token is refused", func(t *testing.T) {
		g := NewWithT(t)
		short, err := p.Provision(withTimeout(t, 5*time.Second), td,
			identity.Machine{Namespace: "runners", Name: "runner-late", BootstrapConfig: "runner-late-bc"}, time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		time.Sleep(time.Until(short.ExpiresAt) + 1100*time.Millisecond)
		conf, _ := spiretest.AgentConfig(t, filepath.Join(dir, "agent-late"), server, short.JoinToken, bundle)
		agent := spiretest.Start(t, "spire-agent-late", agentBin, "run", "-config", conf)
		g.Eventually(agent.Log, 20*time.Second, 200*time.Millisecond).Should(ContainSubstring("join token expired"))
		agentID, _ := AgentID(td, short.JoinToken)
		g.Expect(server.AgentIDs(t)).NotTo(ContainElement(agentID.String()))
		g.Expect(p.Redeemed(withTimeout(t, 5*time.Second), td, identity.Machine{Namespace: "runners", Name: "runner-late"})).To(BeFalse(),
			"an expired token was never spent")
	})

	t.Run("release deletes the machine's entries and evicts its agent, once", func(t *testing.T) {
		g := NewWithT(t)
		agentID, _ := AgentID(td, cred.JoinToken)
		g.Expect(p.Release(withTimeout(t, 5*time.Second), td, machine)).To(Succeed())
		g.Expect(server.Entries(t, cred.ID)).To(BeEmpty())
		g.Expect(server.AgentIDs(t)).NotTo(ContainElement(agentID.String()))
		g.Expect(p.Release(withTimeout(t, 5*time.Second), td, machine)).To(Succeed(), "releasing twice is not an error")
		// Entries for other machines stay.
		other, err := p.Provision(withTimeout(t, 5*time.Second), td, identity.Machine{Namespace: "runners", Name: "runner-b"}, time.Minute)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Release(withTimeout(t, 5*time.Second), td, machine)).To(Succeed())
		g.Expect(server.Entries(t, other.ID)).To(HaveLen(1))
	})

	t.Run("a trust domain the server does not serve is refused before any token exists", func(t *testing.T) {
		g := NewWithT(t)
		_, err := p.Provision(withTimeout(t, 5*time.Second), spiffeid.RequireTrustDomainFromString("other.test"), machine, time.Minute)
		g.Expect(errors.Is(err, ErrTrustDomainMismatch)).To(BeTrue(), "%v", err)
	})
}

func TestProvisionerErrors(t *testing.T) {
	t.Run("an absent server is unavailable", func(t *testing.T) {
		g := NewWithT(t)
		p, err := NewProvisioner(withTimeout(t, time.Second), Config{Address: "unix://" + filepath.Join(t.TempDir(), "nothing.sock")})
		g.Expect(err).NotTo(HaveOccurred())
		defer p.Close()
		_, err = p.TrustBundlePEM(withTimeout(t, 5*time.Second))
		g.Expect(errors.Is(err, ErrUnavailable)).To(BeTrue(), "%v", err)
		_, err = p.Provision(withTimeout(t, 5*time.Second), td, identity.Machine{Namespace: "ns", Name: "m"}, time.Minute)
		g.Expect(errors.Is(err, ErrUnavailable)).To(BeTrue(), "%v", err)
	})
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no address", Config{}},
		{"relative socket path", Config{Address: "unix:server.sock"}},
		{"selector without a value", Config{Address: "unix:///run/spire/server.sock", Selectors: []string{"unix"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewProvisioner(withTimeout(t, time.Second), tc.cfg)
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
}

func TestSeconds(t *testing.T) {
	g := NewWithT(t)
	g.Expect(seconds(0)).To(BeEquivalentTo(1))
	g.Expect(seconds(1500 * time.Millisecond)).To(BeEquivalentTo(2))
	g.Expect(seconds(15 * time.Minute)).To(BeEquivalentTo(900))
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		code codes.Code
		want error
	}{
		{codes.Unavailable, ErrUnavailable},
		{codes.DeadlineExceeded, ErrUnavailable},
		{codes.PermissionDenied, ErrPermissionDenied},
		{codes.Unauthenticated, ErrPermissionDenied},
		{codes.InvalidArgument, ErrRejected},
		{codes.AlreadyExists, ErrRejected},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			g := NewWithT(t)
			err := classify("creating join token", status.Error(tc.code, "no"))
			g.Expect(errors.Is(err, tc.want)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring("creating join token"))
		})
	}
	err := classify("reading the trust bundle", status.Error(codes.Internal, "boom"))
	for _, class := range []error{ErrUnavailable, ErrPermissionDenied, ErrRejected} {
		NewWithT(t).Expect(errors.Is(err, class)).To(BeFalse())
	}
}

func withTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
