package packaging

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// grants are an install's RBAC objects in a comparable form: every rule of every (Cluster)Role and
// the subjects and role of every binding, by kind/namespace/name.
func grants(t *testing.T, objs []unstructured.Unstructured) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, o := range objs {
		key := o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
		var lines []string
		switch o.GetKind() {
		case "ClusterRole", "Role":
			r := &rbacv1.ClusterRole{}
			fromUnstructured(t, o, r)
			for _, rule := range r.Rules {
				for _, g := range orAll(rule.APIGroups) {
					for _, res := range orAll(rule.Resources) {
						for _, v := range rule.Verbs {
							lines = append(lines, strings.Join([]string{g, res, v, strings.Join(rule.ResourceNames, ","), strings.Join(rule.NonResourceURLs, ",")}, " "))
						}
					}
				}
			}
		case "ClusterRoleBinding", "RoleBinding":
			b := &rbacv1.RoleBinding{}
			fromUnstructured(t, o, b)
			lines = append(lines, "role "+b.RoleRef.Kind+"/"+b.RoleRef.Name)
			for _, s := range b.Subjects {
				lines = append(lines, "subject "+s.Kind+"/"+s.Namespace+"/"+s.Name)
			}
		default:
			continue
		}
		slices.Sort(lines)
		out[key] = slices.Compact(lines)
	}
	return out
}

func orAll(s []string) []string {
	if len(s) == 0 {
		return []string{""}
	}
	return s
}

func fromUnstructured(t *testing.T, o unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatal(err)
	}
}

// TestHelmAndKustomizeGrantTheSameRBAC: both installs give every identity the same permissions, and a
// namespace enabled through the chart's tenantNamespaces gets the same bindings as config/tenant.
func TestHelmAndKustomizeGrantTheSameRBAC(t *testing.T) {
	g := NewWithT(t)
	helm := helmBinary(t)
	fromHelm := grants(t, decode(t, run(t, nil, nil, helm, "template", "hyperfleet", chart, "--namespace", namespace)))
	fromKustomize := grants(t, decode(t, kustomize(t, "config/default")))
	g.Expect(fromHelm).To(Equal(fromKustomize))

	const team = "team-a"
	tenantHelm := grants(t, decode(t, run(t, nil, nil, helm, "template", "hyperfleet", chart, "--namespace", namespace,
		"--set", "tenantNamespaces={"+team+"}")))
	for k := range fromHelm {
		delete(tenantHelm, k)
	}
	tenantKustomize := map[string][]string{}
	for k, v := range grants(t, decode(t, kustomize(t, "config/tenant"))) {
		// kubectl apply -n team-a puts the namespace-less bindings there.
		kind, name, _ := strings.Cut(strings.TrimSuffix(k, "/"), "//")
		tenantKustomize[kind+"/"+team+"/"+name] = v
	}
	g.Expect(tenantHelm).To(HaveLen(2))
	g.Expect(tenantHelm).To(Equal(tenantKustomize))
}

// TestNoClusterWideSecrets: no ClusterRole an install binds cluster-wide grants anything on Secrets,
// and the tenant ClusterRoles, bound per namespace, grant no list or watch.
func TestNoClusterWideSecrets(t *testing.T) {
	helm := helmBinary(t)
	for name, manifests := range map[string][]byte{
		"kustomize":  kustomize(t, "config/default"),
		"helm":       run(t, nil, nil, helm, "template", "hyperfleet", chart, "--namespace", namespace, "--set", "tenantNamespaces={team-a}"),
		"clusterctl": releaseComponents(t),
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			objs := decode(t, manifests)
			bound := map[string]bool{}
			for _, o := range objs {
				if o.GetKind() == "ClusterRoleBinding" {
					b := &rbacv1.ClusterRoleBinding{}
					fromUnstructured(t, o, b)
					bound[b.RoleRef.Name] = true
				}
			}
			tenantRoles := 0
			for _, o := range objs {
				if o.GetKind() != "ClusterRole" {
					continue
				}
				r := &rbacv1.ClusterRole{}
				fromUnstructured(t, o, r)
				for _, rule := range r.Rules {
					secrets := slices.Contains(rule.Resources, "secrets") || slices.Contains(rule.Resources, "*")
					if !secrets {
						continue
					}
					g.Expect(bound).NotTo(HaveKey(r.Name), "ClusterRole %s grants Secrets and is bound cluster-wide", r.Name)
					g.Expect(r.Name).To(ContainSubstring("tenant-"), "only the tenant roles mention Secrets")
					g.Expect(rule.Verbs).NotTo(ContainElements("list"), r.Name)
					g.Expect(rule.Verbs).NotTo(ContainElements("watch"), r.Name)
					tenantRoles++
				}
			}
			g.Expect(tenantRoles).To(Equal(2), "hyperfleet-tenant-manager and hyperfleet-tenant-bootstrap")
		})
	}
}

// releaseComponents is both clusterctl components files, as one stream.
func releaseComponents(t *testing.T) []byte {
	t.Helper()
	dir := releaseDir(t)
	var all []byte
	for _, f := range []string{"infrastructure-components.yaml", "bootstrap-components.yaml"} {
		all = append(all, []byte("\n---\n")...)
		all = append(all, mustRead(t, filepath.Join(dir, f))...)
	}
	return all
}
