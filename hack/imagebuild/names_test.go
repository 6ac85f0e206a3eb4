package main

import (
	"os"
	"regexp"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// TestImageNamesMatchTheInstalls keeps the names and tag `make images` gives the images equal to
// what the chart, the kustomize bases, the clusterctl release and the Makefile pull.
func TestImageNamesMatchTheInstalls(t *testing.T) {
	g := NewWithT(t)
	tag := makefileReleaseTag(t)
	o := options{Registry: makefileVar(t, "IMAGE_REGISTRY"), Version: tag}
	ref := map[string]string{}
	for _, s := range specs {
		ref[s.Name] = o.ref(s)
	}

	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	readYAML(t, "../../charts/hyperfleet/Chart.yaml", &chart)
	g.Expect(chart.AppVersion).To(Equal(tag), "the chart's appVersion is its images' default tag")

	type image struct {
		Repository string `json:"repository"`
	}
	var values struct {
		Manager          struct{ Image image } `json:"manager"`
		BootstrapService struct{ Image image } `json:"bootstrapService"`
		Console          struct{ Image image } `json:"console"`
	}
	readYAML(t, "../../charts/hyperfleet/values.yaml", &values)
	g.Expect(values.Manager.Image.Repository + ":" + tag).To(Equal(ref["manager"]))
	g.Expect(values.BootstrapService.Image.Repository + ":" + tag).To(Equal(ref["bootstrap-service"]))
	g.Expect(values.Console.Image.Repository + ":" + tag).To(Equal(ref["console"]))

	for file, want := range map[string]string{
		"../../config/release/infrastructure/kustomization.yaml": ref["manager"],
		"../../config/release/bootstrap/kustomization.yaml":      ref["bootstrap-service"],
		"../../config/console/kustomization.yaml":                ref["console"],
	} {
		var k struct {
			Images []struct {
				NewName string `json:"newName"`
				NewTag  string `json:"newTag"`
			} `json:"images"`
		}
		readYAML(t, file, &k)
		g.Expect(k.Images).To(HaveLen(1), file)
		g.Expect(k.Images[0].NewName+":"+k.Images[0].NewTag).To(Equal(want), file)
	}

	script, err := os.ReadFile("../../hack/release-manifests.sh")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(script)).To(ContainSubstring("IMG=${IMG:-" + o.Registry + "/hyperfleet:$RELEASE_TAG}"))
	g.Expect(string(script)).To(ContainSubstring("BOOTSTRAP_IMG=${BOOTSTRAP_IMG:-" + o.Registry + "/hyperfleet-bootstrap-service:$RELEASE_TAG}"))
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func makefileVar(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + ` \?= (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s ?= line in the Makefile", name)
	}
	return string(m[1])
}
