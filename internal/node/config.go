package node

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// containerdConfig is containerd 1.6's configuration for the node: its own root, state and socket,
// cgroupfs, the distribution's CNI plugins, and the local pause image as sandbox.
func (n *Node) containerdConfig() string {
	d := n.path("containerd")
	return fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = %q
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # Root here may lack CAP_SYS_RESOURCE: no process may lower its oom_score_adj, and without this
  # every sandbox fails in runc ("can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  # Sandboxes' network namespaces live under the node's own directory, so Stop finds them all.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, filepath.Join(d, "root"), filepath.Join(d, "state"), n.ContainerdSocket, n.ContainerdSocket+".ttrpc",
		n.ContainerdSocket+".debug", filepath.Join(d, "opt"), PauseImage, n.opts.CNIBinDir, n.path("cni", "net.d"))
}

// cniConfig puts pods on the node's bridge with no default route: a pod reaches the node's own
// address on the bridge (the API server, services the test runs there) and the Service range,
// and nothing else.
func (n *Node) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "hyperfleet-node",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "isDefaultGateway": false,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": %q,
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "routes": [{"dst": %q}]
    }
  }]
}
`, n.opts.Bridge, n.path("cni", "ipam"), n.opts.PodCIDR, n.Gateway, n.opts.ServiceCIDR)
}

func (n *Node) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://%s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
podLogsDir: %s
volumePluginDir: %s
resolvConf: %s
staticPodPath: ""
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "50Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
protectKernelDefaults: false
`, n.Gateway, n.ports.kubelet, n.ports.kubeletHealth, n.ContainerdSocket, n.pki.path("ca.crt"),
		n.path("pod-logs"), n.path("volume-plugins"), n.path("resolv.conf"))
}

func (n *Node) kubeProxyConfig(kubeconfig string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
nodePortAddresses: [%q]
iptables: {localhostNodePorts: false}
# Leave the kernel's conntrack table size alone: the node shares the machine.
conntrack: {maxPerCore: 0, min: 0}
`, kubeconfig, NodeName, n.opts.PodCIDR, n.Gateway, n.ports.proxyHealth, n.ports.proxyMetrics,
		netip.PrefixFrom(n.Gateway, 32).String())
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}
