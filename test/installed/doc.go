// Package installed tests HyperFleet as users install it: the images `make images` builds,
// imported into a real single-node Kubernetes (internal/node), running the manifests of the
// clusterctl release in real pods under restricted Pod Security and exactly the RBAC the release
// ships.
package installed
