package vsphere

import (
	"context"
	"sort"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Verify implements hypervisor.Provider: it logs in (or reuses the session), finds the configured
// inventory and returns vCenter's version.
func (p *Provider) Verify(ctx context.Context) (string, error) {
	var version string
	err := p.do(ctx, "Verify", func(ctx context.Context, cn *conn) error {
		about := cn.c.ServiceContent.About
		version = about.FullName
		if version == "" {
			version = about.Version
		}
		return nil
	})
	return version, err
}

// Nodes implements hypervisor.Provider: the compute cluster's hosts, online when connected and
// not in vSphere's maintenance mode, with their memory.
func (p *Provider) Nodes(ctx context.Context) ([]hypervisor.Node, error) {
	var out []hypervisor.Node
	err := p.do(ctx, "Nodes", func(ctx context.Context, cn *conn) error {
		var cluster mo.ClusterComputeResource
		if err := property.DefaultCollector(cn.c).RetrieveOne(ctx, cn.cluster.Reference(), []string{"host"}, &cluster); err != nil {
			return err
		}
		if len(cluster.Host) == 0 {
			return nil
		}
		var hosts []mo.HostSystem
		if err := property.DefaultCollector(cn.c).Retrieve(ctx, cluster.Host, []string{"name", "runtime", "summary.hardware", "summary.quickStats"}, &hosts); err != nil {
			return err
		}
		for _, h := range hosts {
			n := hypervisor.Node{Name: h.Name,
				Online: h.Runtime.ConnectionState == types.HostSystemConnectionStateConnected && !h.Runtime.InMaintenanceMode}
			if hw := h.Summary.Hardware; hw != nil {
				n.CPUs = int(hw.NumCpuThreads)
				n.MemoryTotal = uint64(hw.MemorySize)
				used := uint64(h.Summary.QuickStats.OverallMemoryUsage) << 20
				if used < n.MemoryTotal {
					n.MemoryFree = n.MemoryTotal - used
				}
			}
			out = append(out, n)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return nil
	})
	return out, err
}
