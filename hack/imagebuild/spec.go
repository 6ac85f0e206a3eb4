package main

import (
	"fmt"
	"strings"
	"time"
)

// imageSpec describes one image: which command it runs and what the installs call it.
type imageSpec struct {
	// Name is the short name: the OCI layout's directory and the -images selector.
	Name string
	// Repository is the image's name under the registry, as the chart and config/ pull it.
	Repository string
	// Command is the directory under cmd/ and the binary's name at the image's root, which the
	// Deployments' `command:` lines name.
	Command string
	Title   string
	Ports   []string
}

// specs are the images `make images` builds. The in-VM agent is not one of them: it runs in the
// VM, not in a pod, and ships as plain binaries (make release-agent).
var specs = []imageSpec{
	{Name: "manager", Repository: "hyperfleet", Command: "manager", Title: "HyperFleet manager",
		Ports: []string{"8080/tcp", "8081/tcp", "9090/tcp"}},
	{Name: "bootstrap-service", Repository: "hyperfleet-bootstrap-service", Command: "bootstrap-service",
		Title: "HyperFleet bootstrap service", Ports: []string{"8443/tcp", "8081/tcp"}},
	{Name: "console", Repository: "hyperfleet-console", Command: "console", Title: "HyperFleet console",
		Ports: []string{"8080/tcp"}},
}

// platform is a target the images are built for; all are Linux.
type platform struct {
	OS, Arch string
}

func (p platform) String() string { return p.OS + "/" + p.Arch }

var defaultPlatforms = []platform{{"linux", "amd64"}, {"linux", "arm64"}}

func parsePlatforms(s string) ([]platform, error) {
	var out []platform
	for _, f := range strings.Split(s, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || os != "linux" || arch == "" {
			return nil, fmt.Errorf("platform %q: want linux/<arch>", f)
		}
		out = append(out, platform{OS: os, Arch: arch})
	}
	return out, nil
}

func selectSpecs(names string) ([]imageSpec, error) {
	if names == "" {
		return specs, nil
	}
	var out []imageSpec
	for _, n := range strings.Split(names, ",") {
		found := false
		for _, s := range specs {
			if s.Name == strings.TrimSpace(n) {
				out, found = append(out, s), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown image %q", n)
		}
	}
	return out, nil
}

// options are the inputs of one build. Two builds with equal options, sources and Go release
// produce identical images.
type options struct {
	// Root is the repository checkout the binaries are built from.
	Root string
	// Out receives one OCI layout per image and the per-platform tarballs.
	Out string
	// Registry prefixes each image's repository, e.g. ghcr.io/hyperfleet-io.
	Registry string
	Version  string
	Revision string
	// Created is every timestamp in the images: files, config and labels. The commit's time
	// (SOURCE_DATE_EPOCH) keeps builds of one commit identical.
	Created time.Time
	// Source is the repository URL of the org.opencontainers.image.source label.
	Source    string
	Platforms []platform
	Images    []imageSpec
	// CABundle is the PEM file copied to /etc/ssl/certs/ca-certificates.crt.
	CABundle string
	// BinDir, when set, holds binaries already built at <BinDir>/<os>_<arch>/<command>; none are
	// built then.
	BinDir string
}

// ref is the image's full reference with the version as its tag.
func (o options) ref(s imageSpec) string {
	return strings.TrimSuffix(o.Registry, "/") + "/" + s.Repository + ":" + o.Version
}
