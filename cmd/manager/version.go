package main

// version and revision name the release and commit this binary was built from. Image builds
// (hack/imagebuild) set them with -ldflags -X, so a pod's first log line says which build runs.
var (
	version  = "dev"
	revision = "unknown"
)
