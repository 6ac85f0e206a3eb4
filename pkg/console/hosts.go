package console

import (
	"context"
	"sort"

	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// Host is one host of a hypervisor cluster.
type Host struct {
	Namespace     string `json:"namespace"`
	Cluster       string `json:"cluster"`
	Provider      string `json:"provider"`
	Name          string `json:"name"`
	State         string `json:"state"`
	CPUs          int    `json:"cpus"`
	MemoryMiB     uint64 `json:"memoryMiB"`
	FreeMemoryMiB uint64 `json:"freeMemoryMiB"`
	VMs           int    `json:"vms"`
}

// Cluster is one HypervisorCluster as a person sees it.
type Cluster struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Provider  string `json:"provider"`
	Endpoint  string `json:"endpoint"`
	Ready     string `json:"ready"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
	Version   string `json:"version,omitempty"`
	Hosts     int    `json:"hosts"`
	VMs       int    `json:"vms"`
	// InventoryError is why the console could not read the cluster's hosts.
	InventoryError string `json:"inventoryError,omitempty"`
}

// listHosts lists the hosts of the HypervisorClusters the caller may read, from the inventory.
func (s *Server) listHosts(ctx context.Context, c client.Client, namespace string) ([]Host, []Cluster, error) {
	var hosts []Host
	var clusters []Cluster
	err := listVisible(ctx, c, s.inventory.Namespaces(), namespace, func() *infrav1.HypervisorClusterList { return &infrav1.HypervisorClusterList{} },
		func(l *infrav1.HypervisorClusterList) {
			for i := range l.Items {
				hc := &l.Items[i]
				cl := Cluster{Namespace: hc.Namespace, Name: hc.Name, Provider: string(hc.Spec.Provider), Endpoint: hc.Spec.Endpoint,
					Version: hc.Status.Version, Ready: "Unknown"}
				if cond := conditions.Get(hc, infrav1.ReadyCondition); cond != nil {
					cl.Ready, cl.Reason, cl.Message = string(cond.Status), cond.Reason, cond.Message
				}
				ci, ok := s.inventory.Cluster(hc.Namespace, hc.Name)
				if ok {
					cl.InventoryError = ci.Error
					cl.VMs = len(ci.VMs)
					perHost := map[string]int{}
					for _, vm := range ci.VMs {
						perHost[vmHost(vm)]++
					}
					for _, vm := range ci.Foreign {
						perHost[vmHost(vm)]++
					}
					for _, n := range ci.Hosts {
						state := "Offline"
						if n.Online {
							state = "Online"
						}
						hosts = append(hosts, Host{Namespace: hc.Namespace, Cluster: hc.Name, Provider: ci.Provider, Name: n.Name,
							State: state, CPUs: n.CPUs, MemoryMiB: n.MemoryTotal >> 20, FreeMemoryMiB: n.MemoryFree >> 20, VMs: perHost[n.Name]})
						cl.Hosts++
					}
				}
				clusters = append(clusters, cl)
			}
		})
	sort.Slice(hosts, func(i, j int) bool {
		a, b := hosts[i], hosts[j]
		return a.Namespace+"/"+a.Cluster+"/"+a.Name < b.Namespace+"/"+b.Cluster+"/"+b.Name
	})
	return hosts, clusters, err
}
