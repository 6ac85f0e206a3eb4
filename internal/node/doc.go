// Package node starts a real single-node Kubernetes on this machine for tests and the local fleet:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy built from
// the module proxy (hack/tools.sh --node), on containerd, runc and the CNI plugins of the
// distribution. Everything it writes lives under one directory of its own; its pods sit on a bridge
// it makes, with no route beyond the node, and images reach it by import, never by pull.
package node
