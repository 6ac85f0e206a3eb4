// Package packaging verifies the ways HyperFleet is installed: the kustomize tree under config/, the
// clusterctl release assets and cluster templates, and the Helm chart. Each rendering is handed to a
// real kube-apiserver (with Cluster API's and HyperFleet's CRDs) as a server-side dry run, so schema,
// RBAC and naming mistakes fail here rather than on a user's cluster.
package packaging
