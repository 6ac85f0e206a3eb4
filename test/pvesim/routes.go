package pvesim

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/test/pvesim/schema"
)

// request is what a handler sees: validated parameters (URI parameters
// merged in), the caller and, for uploads, the file.
type request struct {
	sim    *Simulator
	r      *http.Request
	p      params
	auth   *authInfo
	upload *uploadFile
	ep     *schema.Endpoint
}

type handlerFunc func(*request) (any, *apiError)

type route struct {
	ep       *schema.Endpoint
	segments []string
	handler  handlerFunc
}

// handlers maps "METHOD /path/{template}" to its implementation. Every entry
// must exist in the embedded schema and every schema entry must have a handler.
func (s *Simulator) handlers() map[string]handlerFunc {
	return map[string]handlerFunc{
		"GET /version":                                                s.getVersion,
		"POST /access/ticket":                                         s.postTicket,
		"GET /access/permissions":                                     s.getPermissions,
		"GET /cluster/mapping/pci":                                    s.getPCIMappings,
		"GET /cluster/nextid":                                         s.getNextID,
		"GET /cluster/resources":                                      s.getResources,
		"GET /cluster/status":                                         s.getClusterStatus,
		"GET /cluster/tasks":                                          s.getClusterTasks,
		"GET /nodes":                                                  s.getNodes,
		"GET /nodes/{node}/status":                                    s.getNodeStatus,
		"GET /nodes/{node}/lxc":                                       s.getContainerList,
		"GET /nodes/{node}/qemu":                                      s.getVMList,
		"DELETE /nodes/{node}/qemu/{vmid}":                            s.deleteVM,
		"GET /nodes/{node}/qemu/{vmid}/config":                        s.getVMConfig,
		"POST /nodes/{node}/qemu/{vmid}/config":                       s.postVMConfig,
		"PUT /nodes/{node}/qemu/{vmid}/config":                        s.putVMConfig,
		"GET /nodes/{node}/qemu/{vmid}/pending":                       s.getVMPending,
		"GET /nodes/{node}/qemu/{vmid}/status/current":                s.getVMStatus,
		"POST /nodes/{node}/qemu/{vmid}/status/start":                 s.postVMStart,
		"POST /nodes/{node}/qemu/{vmid}/status/stop":                  s.postVMStop,
		"POST /nodes/{node}/qemu/{vmid}/status/shutdown":              s.postVMShutdown,
		"POST /nodes/{node}/qemu/{vmid}/status/reboot":                s.postVMReboot,
		"POST /nodes/{node}/qemu/{vmid}/status/reset":                 s.postVMReset,
		"POST /nodes/{node}/qemu/{vmid}/clone":                        s.postVMClone,
		"PUT /nodes/{node}/qemu/{vmid}/resize":                        s.putVMResize,
		"POST /nodes/{node}/qemu/{vmid}/template":                     s.postVMTemplate,
		"GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces":  s.agentNetwork,
		"GET /nodes/{node}/qemu/{vmid}/agent/get-host-name":           s.agentHostName,
		"GET /nodes/{node}/qemu/{vmid}/agent/get-osinfo":              s.agentOSInfo,
		"POST /nodes/{node}/qemu/{vmid}/agent/ping":                   s.agentPing,
		"POST /nodes/{node}/qemu/{vmid}/agent/exec":                   s.agentExec,
		"GET /nodes/{node}/qemu/{vmid}/agent/exec-status":             s.agentExecStatus,
		"GET /nodes/{node}/qemu/{vmid}/snapshot":                      s.getSnapshots,
		"POST /nodes/{node}/qemu/{vmid}/snapshot":                     s.postSnapshot,
		"DELETE /nodes/{node}/qemu/{vmid}/snapshot/{snapname}":        s.deleteSnapshot,
		"GET /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config":    s.getSnapshotConfig,
		"PUT /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config":    s.putSnapshotConfig,
		"POST /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback": s.postRollback,
		"GET /nodes/{node}/qemu/{vmid}/migrate":                       s.getMigratePrecondition,
		"POST /nodes/{node}/qemu/{vmid}/migrate":                      s.postMigrate,
		"GET /nodes/{node}/tasks":                                     s.getNodeTasks,
		"DELETE /nodes/{node}/tasks/{upid}":                           s.deleteTask,
		"GET /nodes/{node}/tasks/{upid}/status":                       s.getTaskStatus,
		"GET /nodes/{node}/tasks/{upid}/log":                          s.getTaskLog,
		"GET /nodes/{node}/storage":                                   s.getStorages,
		"GET /nodes/{node}/storage/{storage}/status":                  s.getStorageStatus,
		"GET /nodes/{node}/storage/{storage}/content":                 s.getStorageContent,
		"GET /nodes/{node}/storage/{storage}/content/{volume}":        s.getVolume,
		"DELETE /nodes/{node}/storage/{storage}/content/{volume}":     s.deleteVolume,
		"POST /nodes/{node}/storage/{storage}/upload":                 s.postUpload,
		"GET /cluster/sdn":                                            s.getSDN,
		"PUT /cluster/sdn":                                            s.putSDN,
		"GET /cluster/sdn/zones":                                      s.getZones,
		"POST /cluster/sdn/zones":                                     s.postZone,
		"GET /cluster/sdn/zones/{zone}":                               s.getZone,
		"PUT /cluster/sdn/zones/{zone}":                               s.putZone,
		"DELETE /cluster/sdn/zones/{zone}":                            s.deleteZone,
		"GET /cluster/sdn/vnets":                                      s.getVNets,
		"POST /cluster/sdn/vnets":                                     s.postVNet,
		"GET /cluster/sdn/vnets/{vnet}":                               s.getVNet,
		"PUT /cluster/sdn/vnets/{vnet}":                               s.putVNet,
		"DELETE /cluster/sdn/vnets/{vnet}":                            s.deleteVNet,
		"GET /cluster/sdn/vnets/{vnet}/subnets":                       s.getSubnets,
		"POST /cluster/sdn/vnets/{vnet}/subnets":                      s.postSubnet,
		"GET /cluster/sdn/vnets/{vnet}/subnets/{subnet}":              s.getSubnet,
		"PUT /cluster/sdn/vnets/{vnet}/subnets/{subnet}":              s.putSubnet,
		"DELETE /cluster/sdn/vnets/{vnet}/subnets/{subnet}":           s.deleteSubnet,
		"POST /cluster/sdn/vnets/{vnet}/ips":                          s.postIPs,
		"PUT /cluster/sdn/vnets/{vnet}/ips":                           s.putIPs,
		"DELETE /cluster/sdn/vnets/{vnet}/ips":                        s.deleteIPs,
		"GET /cluster/sdn/ipams/{ipam}/status":                        s.getIPAMStatus,
		"GET /cluster/firewall/groups":                                s.getFWGroups,
		"POST /cluster/firewall/groups":                               s.postFWGroup,
		"GET /cluster/firewall/groups/{group}":                        s.listRules(groupRules),
		"POST /cluster/firewall/groups/{group}":                       s.addRule(groupRules),
		"DELETE /cluster/firewall/groups/{group}":                     s.deleteFWGroup,
		"GET /cluster/firewall/groups/{group}/{pos}":                  s.getRule(groupRules),
		"PUT /cluster/firewall/groups/{group}/{pos}":                  s.putRule(groupRules),
		"DELETE /cluster/firewall/groups/{group}/{pos}":               s.deleteRule(groupRules),
		"GET /nodes/{node}/qemu/{vmid}/firewall/rules":                s.listRules(vmRules),
		"POST /nodes/{node}/qemu/{vmid}/firewall/rules":               s.addRule(vmRules),
		"GET /nodes/{node}/qemu/{vmid}/firewall/rules/{pos}":          s.getRule(vmRules),
		"PUT /nodes/{node}/qemu/{vmid}/firewall/rules/{pos}":          s.putRule(vmRules),
		"DELETE /nodes/{node}/qemu/{vmid}/firewall/rules/{pos}":       s.deleteRule(vmRules),
		"GET /nodes/{node}/qemu/{vmid}/firewall/options":              s.getVMFWOptions,
		"PUT /nodes/{node}/qemu/{vmid}/firewall/options":              s.putVMFWOptions,
		"GET /storage":                                     s.getStorageDefs,
		"POST /storage":                                    s.postStorage,
		"GET /storage/{storage}":                           s.getStorageDef,
		"DELETE /storage/{storage}":                        s.deleteStorageDef,
		"GET /cluster/replication":                         s.getReplicationJobs,
		"POST /cluster/replication":                        s.postReplicationJob,
		"GET /cluster/replication/{id}":                    s.getReplicationJob,
		"PUT /cluster/replication/{id}":                    s.putReplicationJob,
		"DELETE /cluster/replication/{id}":                 s.deleteReplicationJob,
		"GET /nodes/{node}/replication/{id}/status":        s.getReplicationStatus,
		"POST /nodes/{node}/replication/{id}/schedule_now": s.postReplicationScheduleNow,
		"GET /pools":                                       s.getPools,
		"POST /pools":                                      s.postPool,
		"PUT /pools":                                       s.putPools,
		"DELETE /pools":                                    s.deletePools,
		"GET /pools/{poolid}":                              s.getPool,
		"PUT /pools/{poolid}":                              s.putPool,
		"DELETE /pools/{poolid}":                           s.deletePool,
	}
}

func (s *Simulator) routeTable() error {
	hs := s.handlers()
	seen := map[string]bool{}
	for _, ep := range s.schema.Endpoints {
		key := ep.Method + " " + ep.Path
		h, ok := hs[key]
		if !ok {
			return fmt.Errorf("pvesim: schema endpoint %s has no handler", key)
		}
		seen[key] = true
		s.routes = append(s.routes, &route{ep: ep, segments: splitPath(ep.Path), handler: h})
	}
	for key := range hs {
		if !seen[key] {
			return fmt.Errorf("pvesim: handler %s is not in the embedded schema", key)
		}
	}
	return nil
}

func splitPath(p string) []string {
	var out []string
	for _, seg := range strings.Split(p, "/") {
		if seg != "" {
			out = append(out, seg)
		}
	}
	return out
}

// match finds the route for method and path and returns its URI parameters.
// Like PVE's router, a storage volume swallows the rest of the path, so
// ".../content/local:iso/seed.iso" yields volume "local:iso/seed.iso".
func (s *Simulator) match(method, path string) (*route, map[string]string) {
	segs := splitPath(path)
	for _, rt := range s.routes {
		if rt.ep.Method != method {
			continue
		}
		if uri, ok := matchSegments(rt.segments, segs); ok {
			return rt, uri
		}
	}
	return nil, nil
}

func matchSegments(tmpl, segs []string) (map[string]string, bool) {
	uri := map[string]string{}
	for i, t := range tmpl {
		if i >= len(segs) {
			return nil, false
		}
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			name := t[1 : len(t)-1]
			if name == "volume" && i == len(tmpl)-1 {
				uri[name] = strings.Join(segs[i:], "/")
				return uri, true
			}
			uri[name] = segs[i]
			continue
		}
		if t != segs[i] {
			return nil, false
		}
	}
	return uri, len(tmpl) == len(segs)
}
