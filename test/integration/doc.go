// Package integration holds tests of HyperFleet's API against a real kube-apiserver: CRD schemas, CEL
// rules with their messages, and the shipped samples.
package integration
