package controllertest

import (
	. "github.com/onsi/gomega"

	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// HyperVCluster creates the credentials, CA bundle and a HypervisorCluster of provider hyperv whose
// hosts are sim's.
func HyperVCluster(t *testing.T, ns, name string, sim *hvsim.HyperVHosts) *infrav1.HypervisorCluster {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(Env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-credentials", Namespace: ns},
		StringData: map[string]string{connection.KeyUsername: hvsim.HyperVTestUser, connection.KeyPassword: hvsim.HyperVTestPassword},
	})).To(Succeed())
	g.Expect(Env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-ca", Namespace: ns},
		Data:       map[string][]byte{"ca.crt": sim.CAPEM},
	})).To(Succeed())
	var hosts []infrav1.HyperVHost
	for _, h := range sim.Names {
		hosts = append(hosts, infrav1.HyperVHost{Name: h, Endpoint: sim.Servers[h].URL()})
	}
	hc := builder.NewHypervisorCluster(name, ns).WithEndpoint(hosts[0].Endpoint).WithCABundle(name+"-ca", "").
		WithHyperV(infrav1.HyperVClusterParameters{Hosts: hosts}).Build()
	g.Expect(Env.Client.Create(ctx, hc)).To(Succeed())
	return hc
}
