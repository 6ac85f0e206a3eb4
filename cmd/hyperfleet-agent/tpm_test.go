package main_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/agent"
	"github.com/hyperfleet-io/hyperfleet/pkg/agent/tpm/tpmtest"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/bootstraptest"
)

// A VM with method TPM attests with its (software) TPM, fetches its runner config over mTLS with
// the TPM-resident key, and powers off when idle.
func TestAgentAttestsWithTPM(t *testing.T) {
	g := NewWithT(t)
	v := newVM(t, bootstrapv1.RunnerSpec{IdleTimeout: &metav1.Duration{Duration: 2 * time.Second}})
	cfg := bootstraptest.Get(t, env.Client, v.machine.Config)
	cfg.Spec.Attestation.Method = bootstrapv1.AttestationTPM
	g.Expect(env.Client.Update(context.Background(), cfg)).To(Succeed())
	data, err := os.ReadFile(v.config)
	g.Expect(err).NotTo(HaveOccurred())
	ac, err := agent.ParseConfig(data)
	g.Expect(err).NotTo(HaveOccurred())
	ac.Attestation, ac.TPMDevice = agent.AttestationTPM, tpmtest.Start(t)
	data, err = ac.Marshal()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(v.config, data, 0o600)).To(Succeed())
	installFakeRunner(t, filepath.Join(v.dir, "actions-runner"))

	out, err := v.boot(t)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("IdleTimeout"), "the runner config was fetched with the TPM key")
	g.Expect(v.poweredOff()).To(BeTrue(), out)
	cfg = bootstraptest.Get(t, env.Client, v.machine.Config)
	g.Expect(conditions.IsTrue(cfg, bootstrapv1.AttestedCondition)).To(BeTrue(), out)
}
