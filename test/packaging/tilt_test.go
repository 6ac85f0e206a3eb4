package packaging

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// capiTiltVersion is the Cluster API release tilt-provider.yaml is checked against. Its Tiltfile is
// read from the module at test time; tilt-prepare is not (below), so a Cluster API bump fails here
// until someone has read both again.
const capiTiltVersion = "v1.12.5"

// tiltPrepareKeys are the config keys Cluster API's tilt-prepare decodes (tiltProviderConfig in
// hack/tools/internal/tilt-prepare/main.go at v1.12.5). hack/tools is a module of its own that is
// never published, so this list is transcribed rather than read.
var tiltPrepareKeys = []string{"context", "version", "live_reload_deps", "apply_provider_yaml", "kustomize_folder", "kustomize_options"}

// capiTiltfileContract holds the lines of Cluster API's Tiltfile whose behaviour this test
// reproduces: how it finds and reads a provider file, defaults context and go_main, builds the
// binary and names what it builds. If one changes, the test's reproduction is out of date.
var capiTiltfileContract = []string{
	`file = repo + "/tilt-provider.yaml" if os.path.exists(repo + "/tilt-provider.yaml") else repo + "/tilt-provider.json"`,
	`if type(provider_details) != type([]):`,
	`provider_name = item["name"]`,
	`provider_config = item["config"]`,
	`provider_config["context"] = repo + "/" + provider_config["context"]`,
	`provider_config["go_main"] = "main.go"`,
	`cgo_enabled = "0"`,
	`ldflags = "-extldflags \"-static\""`,
	`build_env = "CGO_ENABLED={cgo_enabled} GOOS=linux GOARCH={arch}"`,
	`go build {build_options} -gcflags '{gcflags}' -ldflags '{ldflags}' -o .tiltbuild/bin/{binary_name} {go_main}`,
	`cmd = "cd {context};{build_cmd}".format(`,
	`live_reload_deps.append(context + "/" + d)`,
	`label.lower() + "_binary"`,
	`binary_name = "manager",`,
	`ref = image,`,
	`read_file("./.tiltbuild/yaml/{}.provider.yaml".format(name))`,
	`workload = find_object_name(objs, "Deployment"),`,
	`if o["kind"] == kind and "cluster.x-k8s.io/provider" in o["metadata"]["labels"]:`,
	// Cluster API's own core provider relies on Tilt matching images by repository, whatever the
	// tag: the Tiltfile names the image untagged, config/default pins :main.
	`"image": "gcr.io/k8s-staging-cluster-api/cluster-api-controller",`,
}

type tiltProviderConfig struct {
	Image           string   `json:"image"`
	Context         *string  `json:"context"`
	GoMain          *string  `json:"go_main"`
	LiveReloadDeps  []string `json:"live_reload_deps"`
	Label           string   `json:"label"`
	KustomizeFolder *string  `json:"kustomize_folder"`
	ApplyProvider   *bool    `json:"apply_provider_yaml"`
}

// TestTiltProvider checks tilt-provider.yaml against what Cluster API's Tiltfile and tilt-prepare do
// with it. Tilt itself does not run here.
func TestTiltProvider(t *testing.T) {
	g := NewWithT(t)
	capiDir := strings.Fields(string(goIn(t, env.RepoRoot, nil, "list", "-m", "-f", "{{.Version}} {{.Dir}}", "sigs.k8s.io/cluster-api")))
	g.Expect(capiDir).To(HaveLen(2), "the Cluster API module must be downloaded")
	g.Expect(capiDir[0]).To(Equal(capiTiltVersion), "go.mod moved Cluster API: read its Tiltfile and tilt-prepare again, then update this test")
	tiltfile := string(mustRead(t, filepath.Join(capiDir[1], "Tiltfile")))
	for _, line := range capiTiltfileContract {
		g.Expect(tiltfile).To(ContainSubstring(line), "Cluster API's Tiltfile changed how it treats a provider")
	}
	g.Expect(string(mustRead(t, filepath.Join(capiDir[1], "config", "default", "manager_image_patch.yaml")))).
		To(ContainSubstring("image: gcr.io/k8s-staging-cluster-api/cluster-api-controller:main"))

	known := append(slices.Clone(tiltPrepareKeys), "context", "go_main")
	for _, m := range regexp.MustCompile(`p\.get\("([a-z_]+)"`).FindAllStringSubmatch(tiltfile, -1) {
		known = append(known, m[1])
	}
	var builtinLabels []string
	for _, m := range regexp.MustCompile(`"label": "([^"]+)"`).FindAllStringSubmatch(tiltfile, -1) {
		builtinLabels = append(builtinLabels, strings.ToLower(m[1]))
	}
	g.Expect(builtinLabels).NotTo(BeEmpty())

	raw := mustRead(t, filepath.Join(env.RepoRoot, "tilt-provider.yaml"))
	var doc any
	g.Expect(yaml.Unmarshal(raw, &doc)).To(Succeed())
	_, tiltfileSeesList := doc.([]any)
	// tilt-prepare takes the file for a list only when its very first byte says so.
	prepareSeesList := bytes.HasPrefix(raw, []byte("[")) || bytes.HasPrefix(raw, []byte("-"))
	g.Expect(prepareSeesList).To(Equal(tiltfileSeesList),
		"the Tiltfile reads a list (%t) where tilt-prepare reads a list (%t): comments before a list break tilt-prepare", tiltfileSeesList, prepareSeesList)
	entries := []any{doc}
	if tiltfileSeesList {
		entries = doc.([]any)
	}
	g.Expect(entries).NotTo(BeEmpty())

	for _, e := range entries {
		entry, ok := e.(map[string]any)
		g.Expect(ok).To(BeTrue(), "a provider is a mapping")
		name, _ := entry["name"].(string)
		rawConfig, ok := entry["config"].(map[string]any)
		g.Expect(ok).To(BeTrue(), "provider %q has no config", name)
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(name).To(Equal("hyperfleet"), "docs/install.md tells users to enable `hyperfleet`")
			for key := range rawConfig {
				g.Expect(known).To(ContainElement(key), "neither the Tiltfile nor tilt-prepare reads config.%s", key)
			}
			var c tiltProviderConfig
			b, err := yaml.Marshal(rawConfig)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(yaml.Unmarshal(b, &c)).To(Succeed())
			checkTiltProvider(t, c, builtinLabels)
		})
	}
}

func checkTiltProvider(t *testing.T, c tiltProviderConfig, builtinLabels []string) {
	g := NewWithT(t)
	// Without an image the Tiltfile builds nothing; without a label it fails on label.lower().
	g.Expect(c.Image).NotTo(BeEmpty())
	g.Expect(c.Label).NotTo(BeEmpty())
	g.Expect(builtinLabels).NotTo(ContainElement(strings.ToLower(c.Label)), "resource names %s_binary and %s_controller are taken", strings.ToLower(c.Label), strings.ToLower(c.Label))
	g.Expect(c.ApplyProvider == nil || *c.ApplyProvider).To(BeTrue(), "the provider's manifests must be applied")
	// tilt-prepare starts the manager under the restart script only when there are live_reload_deps.
	g.Expect(c.LiveReloadDeps).NotTo(BeEmpty())

	contextDir := filepath.Join(env.RepoRoot, deref(c.Context, "."))
	goMain := deref(c.GoMain, "main.go")
	module := strings.TrimSpace(string(goIn(t, env.RepoRoot, nil, "list", "-m")))

	t.Run("live_reload_deps cover the manager's sources", func(t *testing.T) {
		for _, d := range c.LiveReloadDeps {
			_, err := os.Stat(filepath.Join(contextDir, d))
			NewWithT(t).Expect(err).NotTo(HaveOccurred(), "live_reload_deps names %s", d)
		}
		coversSources(t, contextDir, c.LiveReloadDeps, goMain)
	})

	t.Run("go_main is the manager package", func(t *testing.T) {
		// The Tiltfile runs `go build ... {go_main}` in the context. A file name there (main.go) builds
		// "command-line-arguments" from that one file, without the rest of the package; a package
		// path builds the manager. This test resolves go_main as go build would, without compiling.
		g := NewWithT(t)
		out := string(goIn(t, contextDir, nil, "list", "-f", "{{.Name}} {{.ImportPath}} {{join .GoFiles \",\"}}", goMain))
		g.Expect(out).To(HavePrefix("main "+module+"/cmd/manager "), "go_main %s", goMain)
		files, err := filepath.Glob(filepath.Join(env.RepoRoot, "cmd", "manager", "*.go"))
		g.Expect(err).NotTo(HaveOccurred())
		var sources []string
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				sources = append(sources, filepath.Base(f))
			}
		}
		g.Expect(strings.Split(strings.TrimSpace(strings.Fields(out)[2]), ",")).To(ConsistOf(sources))
	})

	t.Run("kustomize_folder renders the manager the image replaces", func(t *testing.T) {
		g := NewWithT(t)
		dir, err := filepath.Rel(env.RepoRoot, filepath.Join(contextDir, deref(c.KustomizeFolder, "config/default")))
		g.Expect(err).NotTo(HaveOccurred())
		objs := decode(t, kustomize(t, dir))

		// tilt-prepare adds the clusterctl Provider from the first Namespace's provider label.
		ns := slices.IndexFunc(objs, func(o unstructured.Unstructured) bool { return o.GetKind() == "Namespace" })
		g.Expect(ns).NotTo(Equal(-1))
		g.Expect(objs[ns].GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/provider", "infrastructure-hyperfleet"))

		// The Tiltfile's controller resource is the first Deployment with the provider label, and
		// tilt-prepare points the container named manager at the binary it builds.
		var workload *appsv1.Deployment
		for _, o := range objs {
			if o.GetKind() != "Deployment" {
				continue
			}
			g.Expect(o.GetLabels()).NotTo(BeNil(), "the Tiltfile indexes metadata.labels of every Deployment")
			if _, ok := o.GetLabels()["cluster.x-k8s.io/provider"]; ok && workload == nil {
				workload = deployment(t, o)
			}
		}
		g.Expect(workload).NotTo(BeNil())
		g.Expect(workload.Name).To(Equal("hyperfleet-controller-manager"))
		g.Expect(imageRepository(container(t, workload, "manager").Image)).To(Equal(c.Image))
	})

	t.Run("the build output is not committed", func(t *testing.T) {
		gitIgnores(t, filepath.Join(contextDir, ".tiltbuild", "bin", "manager"))
	})
}

// TestTiltfile checks this repository's own Tiltfile against config/default and the Go packages it
// builds: the names, paths, images, users and ports it spells out. Tilt itself does not run here.
func TestTiltfile(t *testing.T) {
	g := NewWithT(t)
	tiltfile := string(mustRead(t, filepath.Join(env.RepoRoot, "Tiltfile")))
	module := strings.TrimSpace(string(goIn(t, env.RepoRoot, nil, "list", "-m")))

	depsList := regexp.MustCompile(`(?m)^go_deps = \[([^\]]*)\]`).FindStringSubmatch(tiltfile)
	g.Expect(depsList).NotTo(BeNil())
	goDeps := quoted(depsList[1])
	binaries := map[string]string{} // binary name → main package
	for _, m := range regexp.MustCompile(`go_binary\("([^"]+)", "([^"]+)"\)`).FindAllStringSubmatch(tiltfile, -1) {
		binaries[m[1]] = m[2]
	}
	images := map[string]string{} // binary name → image ref
	for _, m := range regexp.MustCompile(`dev_image\("([^"]+)", "([^"]+)"\)`).FindAllStringSubmatch(tiltfile, -1) {
		images[m[2]] = m[1]
	}
	g.Expect(binaries).To(HaveKey("manager"))
	g.Expect(images).To(HaveLen(len(binaries)), "one dev image per binary")

	t.Run("go_deps cover the binaries' sources", func(t *testing.T) {
		for name, main := range binaries {
			g := NewWithT(t)
			g.Expect(string(goIn(t, env.RepoRoot, nil, "list", "-f", "{{.Name}} {{.ImportPath}}", main))).
				To(Equal("main "+module+"/"+strings.TrimPrefix(main, "./")+"\n"), "binary %s", name)
			coversSources(t, env.RepoRoot, goDeps, main)
		}
	})

	objs := decode(t, kustomize(t, "config/default"))
	deployments := map[string]*appsv1.Deployment{}
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			deployments[o.GetName()] = deployment(t, o)
		}
	}

	t.Run("each dev image is the one its Deployment runs", func(t *testing.T) {
		uid := regexp.MustCompile(`chown (\d+):(\d+) /app`).FindStringSubmatch(tiltfile)
		NewWithT(t).Expect(uid).NotTo(BeNil())
		for name, ref := range images {
			g := NewWithT(t)
			var users []string
			for _, d := range deployments {
				for _, c := range d.Spec.Template.Spec.Containers {
					if imageRepository(c.Image) != ref {
						continue
					}
					// The restart wrapper replaces the command, which must have started this binary.
					g.Expect(c.Command).To(Equal([]string{"/" + name}), "image %s", ref)
					users = append(users, d.Name)
					sc := d.Spec.Template.Spec.SecurityContext
					g.Expect(sc).NotTo(BeNil())
					g.Expect(sc.RunAsUser).To(HaveValue(BeNumerically("==", atoi(t, uid[1]))), "the synced binary is owned by the pod's user")
				}
			}
			g.Expect(users).To(HaveLen(1), "image %s", ref)
		}
	})

	t.Run("the objects the Tiltfile edits exist", func(t *testing.T) {
		g := NewWithT(t)
		for _, d := range deployments {
			for _, c := range d.Spec.Template.Spec.Containers {
				g.Expect(c.SecurityContext).NotTo(BeNil(), "the Tiltfile sets readOnlyRootFilesystem of %s/%s", d.Name, c.Name)
			}
		}
		for _, m := range regexp.MustCompile(`o\["kind"\] == "([A-Za-z]+)" and o\["metadata"\]\["name"\] == "([^"]+)"`).FindAllStringSubmatch(tiltfile, -1) {
			i := slices.IndexFunc(objs, func(o unstructured.Unstructured) bool { return o.GetKind() == m[1] && o.GetName() == m[2] })
			g.Expect(i).NotTo(Equal(-1), "%s %s", m[1], m[2])
			if m[1] == "ConfigMap" {
				g.Expect(objs[i].Object).To(HaveKey("data"), "the Tiltfile merges extra_env into data")
			}
		}
		for _, dir := range regexp.MustCompile(`kustomize\("([^"]+)"\)`).FindAllStringSubmatch(tiltfile, -1) {
			_, err := os.Stat(filepath.Join(env.RepoRoot, dir[1], "kustomization.yaml"))
			g.Expect(err).NotTo(HaveOccurred())
		}
	})

	t.Run("resources name Deployments, their binaries and their ports", func(t *testing.T) {
		chunks := strings.Split(tiltfile, "k8s_resource(")[1:]
		NewWithT(t).Expect(chunks).To(HaveLen(len(binaries)))
		for _, chunk := range chunks {
			g := NewWithT(t)
			workload := regexp.MustCompile(`^\s*"([^"]+)"`).FindStringSubmatch(chunk)
			g.Expect(workload).NotTo(BeNil())
			d, ok := deployments[workload[1]]
			g.Expect(ok).To(BeTrue(), "k8s_resource %s names no Deployment of config/default", workload[1])
			if !ok {
				continue
			}
			dep := regexp.MustCompile(`"([a-z-]+)-binary"`).FindStringSubmatch(chunk)
			g.Expect(dep).NotTo(BeNil(), "%s waits for its binary", d.Name)
			g.Expect(slices.ContainsFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool {
				return imageRepository(c.Image) == images[dep[1]]
			})).To(BeTrue(), "%s runs the image of %s", d.Name, dep[1])
			var containerPorts []int32
			for _, c := range d.Spec.Template.Spec.Containers {
				for _, p := range c.Ports {
					containerPorts = append(containerPorts, p.ContainerPort)
				}
			}
			for _, m := range regexp.MustCompile(`port_forward\((\d+), (\d+)`).FindAllStringSubmatch(chunk, -1) {
				g.Expect(containerPorts).To(ContainElement(int32(atoi(t, m[2]))), "%s forwards port %s", d.Name, m[2])
			}
		}
	})

	t.Run("the build output is not committed", func(t *testing.T) {
		for name := range binaries {
			gitIgnores(t, filepath.Join(env.RepoRoot, "bin", "tilt", name))
		}
	})
}

// coversSources fails unless every directory of this repository that goMain compiles lies under one
// of deps (relative to dir), so a save anywhere in the binary's sources rebuilds it.
func coversSources(t *testing.T, dir string, deps []string, goMain string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(deps).To(ContainElements("go.mod", "go.sum"))
	out := goIn(t, dir, nil, "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}", goMain)
	for _, pkg := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(env.RepoRoot, pkg)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		g.Expect(slices.ContainsFunc(deps, func(d string) bool {
			d = filepath.Clean(filepath.Join(dir, d))
			return pkg == d || strings.HasPrefix(pkg, d+string(filepath.Separator))
		})).To(BeTrue(), "%s compiles %s, which no dependency watches", goMain, rel)
	}
}

// gitIgnores fails when git would offer file for a commit.
func gitIgnores(t *testing.T, file string) {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	out, err := tryRun(nil, nil, git, "check-ignore", "--no-index", file)
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "%s is not ignored: %s", file, out)
}

// goIn runs the go command in dir, as the Tiltfile runs its build after `cd {context}`.
func goIn(t *testing.T, dir string, extraEnv []string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// imageRepository drops an image reference's tag and digest: Tilt matches images by repository.
func imageRepository(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

func quoted(list string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(list, -1) {
		out = append(out, m[1])
	}
	return out
}

func deref(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
