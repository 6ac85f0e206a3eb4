package controllertest

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/vspheresim"
)

// VSphereCluster creates the credentials, CA bundle and a HypervisorCluster of provider vsphere
// whose vCenter is sim, with the inventory sim made.
func VSphereCluster(t *testing.T, ns, name string, sim *vspheresim.Simulator) *infrav1.HypervisorCluster {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(Env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-credentials", Namespace: ns},
		StringData: map[string]string{connection.KeyUsername: sim.Username, connection.KeyPassword: sim.Password},
	})).To(Succeed())
	g.Expect(Env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-ca", Namespace: ns},
		Data:       map[string][]byte{"ca.crt": sim.CA},
	})).To(Succeed())
	hc := builder.NewHypervisorCluster(name, ns).WithEndpoint(sim.URL).WithCABundle(name+"-ca", "").
		WithVSphere(infrav1.VSphereClusterParameters{Datacenter: sim.Datacenter, ComputeCluster: sim.Cluster, Datastore: sim.Datastore}).Build()
	g.Expect(Env.Client.Create(ctx, hc)).To(Succeed())
	return hc
}
