// Package testenv starts the real control plane HyperFleet's integration tests run against: an envtest
// kube-apiserver and etcd with Cluster API's and HyperFleet's CRDs installed, optionally with the real
// Cluster API core manager as a process. Start it once per test package, in TestMain.
package testenv
