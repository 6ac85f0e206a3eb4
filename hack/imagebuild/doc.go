// Command imagebuild builds HyperFleet's container images (the manager, the bootstrap service and
// the console) without a container engine and without pulling a base image: it cross-compiles each
// static binary and assembles the images, layer by layer, with go-containerregistry. The output is
// reproducible, so two builds of one commit with one Go release give the same digests.
//
//	go run ./hack/imagebuild -out bin/images -version v0.1.0
//
// It writes one OCI image layout per image (an index for linux/amd64 and linux/arm64) and, per
// platform, a docker-archive tarball that `ctr images import` accepts.
package main
