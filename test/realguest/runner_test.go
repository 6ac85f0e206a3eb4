package realguest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
	"github.com/hyperfleet-io/hyperfleet/pkg/agent"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// guestBound is how long a TCG guest may take for each step: booting to cloud-init's runcmd takes
// about 90-100 s on an idle 2-core machine, and several times that beside compiles.
const guestBound = 10 * time.Minute

// TestRunnerJobOnARealGuest runs one job through the whole loop with a real guest: the webhook, the
// clone, a QEMU boot of the runner template, real cloud-init running HyperFleet's user-data from
// the seed ISO, the real agent attesting to the bootstrap service and running the job, the
// guest's power-off and the sweep's destroy. Then it reads the guest's disk: no runner config,
// CI platform credential, private key or CA key may be anywhere on it, freed blocks included; the
// join token, which cloud-init keeps copies of, must be worthless by then (redeemed: a second
// redemption is refused).
func TestRunnerJobOnARealGuest(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	t.Parallel() // beside the persistent VM's guest
	g := NewWithT(t)
	startFleet(t)
	ctx := context.Background()
	c := fleet.Client()
	ns := fleet.State.Namespace
	t.Logf("runner template: hack/template.sh took %s", templateBuild.Round(time.Second))

	queued := time.Now()
	jobs, err := devfleet.CreateJobs(ctx, &fleet.State, devfleet.JobRequest{Count: 1, Labels: labels, Name: "real-guest"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jobs).To(HaveLen(1))
	jobID := jobs[0].ID

	// The runner's claim and VM, and the bootstrap data it was given (read while it exists: it
	// goes with the Machine).
	var claim infrav1.MachineClaim
	var vmid int
	g.Eventually(func(g Gomega) {
		var claims infrav1.MachineClaimList
		g.Expect(c.List(ctx, &claims, client.InNamespace(ns), client.MatchingLabels{fleetv1.RunnerPoolNameLabel: fleet.State.Pool})).To(Succeed())
		g.Expect(claims.Items).To(HaveLen(1))
		claim = claims.Items[0]
		vmid, err = strconv.Atoi(claim.Status.VMID)
		g.Expect(err).NotTo(HaveOccurred())
		vm, ok := fleet.Simulator.VM(vmid)
		g.Expect(ok).To(BeTrue())
		g.Expect(vm.Status).To(Equal("running"))
	}, 2*time.Minute, time.Second).Should(Succeed(), "a runner VM is cloned and started")
	started := time.Now()
	t.Logf("VM %d started %s after the job was queued; its console: %s", vmid, started.Sub(queued).Round(time.Second), fleet.Simulator.GuestConsoleLog(vmid))

	config, userData := bootstrapData(ctx, g, c, &claim)
	agentCfg, err := agent.ConfigFromUserData(userData, agent.DefaultConfigPath)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(agentCfg.ServiceURL).To(HavePrefix("https://"+pvesim.GuestForwardIP+":"), "the guest reaches the service at the forwarded address")
	joinToken := agentCfg.JoinToken
	g.Expect(joinToken).NotTo(BeEmpty())

	// Attested: the real agent redeemed the token from inside the guest.
	cfgKey := client.ObjectKeyFromObject(config)
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, cfgKey, config)).To(Succeed())
		g.Expect(config.Status.AttestedTime).NotTo(BeNil())
	}, guestBound, time.Second).Should(Succeed(), "the agent in the guest attests (console: %s)", fleet.Simulator.GuestConsoleLog(vmid))
	attested := config.Status.AttestedTime.Time
	t.Logf("attested %s after the VM started", attested.Sub(started).Round(time.Second))

	// Redeemed means worthless: what cloud-init keeps of the token on the disk opens nothing.
	status, body := attestWith(g, joinToken)
	g.Expect(status).To(Equal(http.StatusConflict), "a second redemption of the join token is refused: %s", body)

	// The guest's address, as its real guest agent reports it.
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(&claim), &claim)).To(Succeed())
		g.Expect(claim.Status.Addresses).To(ContainElement(HaveField("Address", "10.0.2.15")))
	}, guestBound, time.Second).Should(Succeed(), "the guest agent's addresses reach the claim's status")

	var job fakegithub.Job
	g.Eventually(func(g Gomega) {
		var ok bool
		job, ok = fleet.GitHub.Job(jobID)
		g.Expect(ok).To(BeTrue())
		g.Expect(job.Status).To(Equal("completed"))
	}, guestBound, time.Second).Should(Succeed(), "the job runs on the guest")
	g.Expect(job.Conclusion).To(Equal("success"))
	t.Logf("job done %s after the VM started (on runner %s)", job.CompletedAt.Sub(started).Round(time.Second), job.RunnerName)

	g.Eventually(func(g Gomega) {
		vm, ok := fleet.Simulator.VM(vmid)
		if ok {
			g.Expect(vm.Status).To(Equal("stopped"))
		}
	}, guestBound, time.Second).Should(Succeed(), "the guest powers itself off")
	stopped := time.Now()
	t.Logf("powered off %s after the VM started", stopped.Sub(started).Round(time.Second))

	g.Eventually(func(g Gomega) {
		_, exists := fleet.Simulator.VM(vmid)
		g.Expect(exists).To(BeFalse())
		err := c.Get(ctx, client.ObjectKeyFromObject(&claim), &infrav1.MachineClaim{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, 2*time.Minute, time.Second).Should(Succeed(), "the sweep destroys the VM and its claim goes")
	t.Logf("destroyed %s after the VM started", time.Since(started).Round(time.Second))

	overlay, ok := fleet.Simulator.GuestDisk(vmid)
	g.Expect(ok).To(BeTrue())
	scanDisk(t, g, overlay, joinToken, job)
}

// bootstrapData finds the claim's BootstrapConfig and the user-data of its data Secret.
func bootstrapData(ctx context.Context, g *WithT, c client.Client, claim *infrav1.MachineClaim) (*bootstrapv1.BootstrapConfig, []byte) {
	var machine clusterv1.Machine
	g.Eventually(func(g Gomega) {
		owner := ""
		for _, ref := range claim.OwnerReferences {
			if ref.Kind == "Machine" {
				owner = ref.Name
			}
		}
		g.Expect(owner).NotTo(BeEmpty())
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: owner}, &machine)).To(Succeed())
		g.Expect(machine.Spec.Bootstrap.DataSecretName).NotTo(BeNil())
	}, time.Minute, time.Second).Should(Succeed())
	config := &bootstrapv1.BootstrapConfig{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: machine.Spec.Bootstrap.ConfigRef.Name}, config)).To(Succeed())
	var secret corev1.Secret
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: *machine.Spec.Bootstrap.DataSecretName}, &secret)).To(Succeed())
	return config, secret.Data["value"]
}

// attestWith tries to redeem a join token at the bootstrap service, as anyone who found it could.
func attestWith(g *WithT, joinToken string) (int, string) {
	_, csr, err := identity.NewKeyAndCSR()
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := json.Marshal(protocol.AttestRequest{JoinToken: joinToken, CSR: string(csr)})
	// The test reaches the service on loopback; the bundle's CA signed its certificate.
	url := strings.Replace(fleet.State.Bootstrap.URL, pvesim.GuestForwardIP, "127.0.0.1", 1) + protocol.AttestPath
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caCertificate(g))
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.String()
}

// caSecret is the bootstrap service's CA key pair.
func caSecret(g *WithT) *corev1.Secret {
	var s corev1.Secret
	g.Expect(fleet.Client().Get(context.Background(), fleet.Installation.CASecret, &s)).To(Succeed())
	return &s
}

func caCertificate(g *WithT) []byte { return caSecret(g).Data["tls.crt"] }

// scanDisk reads the guest's disk and fails on any secret of the loop found on it. The join token
// may remain (cloud-init keeps its own copies of the user-data, and freed blocks keep what the
// agent scrubbed), because it was redeemed; it is reported. So may the runner's own credentials,
// which actions/runner writes into its directory (.credentials_rsaparams holds its private key),
// because GitHub deleted the ephemeral runner with its job: they are reported, and shown to get
// no token.
func scanDisk(t *testing.T, g *WithT, overlay, joinToken string, job fakegithub.Job) {
	t.Helper()
	raw := rawDisk(t, overlay, t.TempDir())
	encoded, ok := fleet.GitHub.IssuedJITConfig(job.RunnerID)
	g.Expect(ok).To(BeTrue(), "the fake GitHub kept the JIT config it issued for runner %d", job.RunnerID)
	runnerConfig := jitConfigForms(g, encoded)
	forbidden := []secret{
		pemAndDER("the bootstrap CA's private key", caSecret(g).Data["tls.key"]),
		pemAndDER("the GitHub App's private key", fleet.GitHub.AppKeyPEM()),
	}
	// The bootstrap data carries the agent's configuration base64-encoded: so do cloud-init's
	// copies of it.
	tokenSecret := secret{name: "the join token", forms: append([][]byte{[]byte(joinToken)}, base64Forms([]byte(joinToken))...)}
	hits := scanRanges(t, raw, nil, append([]secret{tokenSecret, runnerConfig}, forbidden...))
	// Keys the agent generated never leave its memory: no private key of any kind is in what the
	// guest wrote (the template's own files are not the guest's doing).
	written := guestWritten(t, overlay)
	for name, h := range scanRanges(t, raw, written, []secret{privateKeyMarkers}) {
		hits[name] = h
	}
	attributeFiles(t, raw, append([]secret{tokenSecret, runnerConfig, privateKeyMarkers}, forbidden...), hits)
	var written64 int64
	for _, r := range written {
		written64 += r[1] - r[0]
	}
	t.Logf("disk scan: %d MiB written by the guest", written64>>20)
	if h := hits[tokenSecret.name]; h != nil {
		t.Logf("the redeemed join token is on the disk %s", h)
	}
	// Whether they reached the disk depends on whether the guest wrote its page cache back before
	// its VM was stopped (seconds after they were written); either way they are worthless.
	if h := hits[runnerConfig.name]; h != nil {
		t.Logf("the deleted runner's credentials are on the disk %s", h)
	} else {
		t.Logf("the runner's credentials did not reach the disk")
	}

	expectRunnerCredentialsWorthless(g, encoded)
	for _, s := range append(forbidden, privateKeyMarkers) {
		if h := hits[s.name]; h != nil {
			t.Errorf("%s is on the guest's disk: %s", s.name, h)
		}
	}
}

// jitConfigForms are the forms the runner's JIT config takes on a disk: the encoded config itself
// (a stretch of its middle, unique to it), and the runner's RSA private exponent as the runner's
// .credentials_rsaparams file holds it (base64) and as raw bytes.
func jitConfigForms(g *WithT, encoded string) secret {
	cfg, err := fakegithub.DecodeJITConfig(encoded)
	g.Expect(err).NotTo(HaveOccurred())
	d := cfg.Key.D.Bytes()
	mid := len(encoded) / 2
	return secret{name: "the runner's JIT config and key", forms: [][]byte{
		[]byte(encoded[mid : mid+64]),
		[]byte(base64.StdEncoding.EncodeToString(d)[:64]),
		d,
	}}
}

// expectRunnerCredentialsWorthless plays whoever found the runner's credentials on the disk:
// the ephemeral runner was deleted with its job, so its key gets no token.
func expectRunnerCredentialsWorthless(g *WithT, encoded string) {
	c, err := fakegithub.NewRunnerClient(encoded, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Online(context.Background())).To(MatchError(And(ContainSubstring("401"), ContainSubstring("invalid_client"))),
		"a deleted runner's key gets no access token")
}

// pemAndDER are a PEM private key's forms: its PEM body lines, its DER and, for an EC key, the
// private scalar itself.
func pemAndDER(name string, keyPEM []byte) secret {
	s := secret{name: name}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return s
	}
	// A base64 line of the PEM body is 64 characters: long enough to be unique, short enough to
	// survive re-wrapping.
	lines := strings.Split(strings.TrimSpace(string(pem.EncodeToMemory(block))), "\n")
	if len(lines) > 3 {
		s.forms = append(s.forms, []byte(lines[1]), []byte(lines[len(lines)/2]))
	}
	s.forms = append(s.forms, block.Bytes)
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		if raw, err := k.Bytes(); err == nil {
			s.forms = append(s.forms, raw)
		}
	} else if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if ec, ok := k.(*ecdsa.PrivateKey); ok {
			if raw, err := ec.Bytes(); err == nil {
				s.forms = append(s.forms, raw)
			}
		}
	}
	return s
}

// base64Forms are the stretches of base64 text that encode b wherever it starts in the encoded
// data: one per alignment of b to base64's 3-byte groups, without the characters its neighbours
// share.
func base64Forms(b []byte) [][]byte {
	var forms [][]byte
	for k := 0; k < 3; k++ {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, k), b...))
		// Character i covers bits 6i..6i+5; b covers bits 8k..8(k+len)-1.
		lo, hi := (8*k+5)/6, (8*(k+len(b))-6)/6
		forms = append(forms, []byte(enc[lo:hi+1]))
	}
	return forms
}
