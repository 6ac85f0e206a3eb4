package api

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	controlplanev1 "github.com/hyperfleet-io/hyperfleet/api/controlplane/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// AddToScheme registers HyperFleet's kinds.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		infrav1.AddToScheme, bootstrapv1.AddToScheme, fleetv1.AddToScheme, controlplanev1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// NewScheme returns a scheme with the Kubernetes built-ins, Cluster API's core and IPAM kinds and HyperFleet's.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(ipamv1.AddToScheme(s))
	utilruntime.Must(AddToScheme(s))
	return s
}
