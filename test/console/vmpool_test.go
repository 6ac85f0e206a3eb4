package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/console"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakeoidc"
)

// vmPoolObject is a VMPool of replicas VMs on cluster pve.
func vmPoolObject(namespace, name string, replicas int32, autoscaling *fleetv1.VMPoolAutoscaling) *fleetv1.VMPool {
	return &fleetv1.VMPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: fleetv1.VMPoolSpec{
			Replicas: ptr.To(replicas),
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: fleetv1.VMPoolMachineTemplate{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: infrav1.MachineClaimSpec{
					MachineClaimLifecycleSpec: infrav1.MachineClaimLifecycleSpec{Lifecycle: infrav1.LifecyclePersistent, RunStrategy: infrav1.RunStrategyAlways},
					Template:                  infrav1.TemplateSource{ID: "9000"},
					HypervisorClusterName:     "pve",
				},
			},
			Strategy:    fleetv1.VMPoolStrategy{Type: fleetv1.RecreateVMPoolStrategy},
			Autoscaling: autoscaling,
		},
	}
}

// vmPool creates a VMPool of replicas VMs on cluster pve, as HyperFleet's controller would report it
// with ready of them ready (status is written here: no controller runs).
func vmPool(t *testing.T, namespace, name string, replicas, ready int32, autoscaling *fleetv1.VMPoolAutoscaling) *fleetv1.VMPool {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	p := vmPoolObject(namespace, name, replicas, autoscaling)
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	now := metav1.Now()
	p.Status = fleetv1.VMPoolStatus{Replicas: replicas, ReadyReplicas: ready, AvailableReplicas: ready - 1, UpdatedReplicas: replicas,
		Selector: "app=" + name, Conditions: []metav1.Condition{
			{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: fleetv1.VMPoolUnavailableReason,
				Message: "1 of the VMs is not available", LastTransitionTime: now},
			{Type: fleetv1.ProgressingCondition, Status: metav1.ConditionTrue, Reason: fleetv1.VMPoolWaitingForVMsReason,
				Message: "waiting for VMs to be available", LastTransitionTime: now},
		}}
	g.Expect(env.Client.Status().Update(ctx, p)).To(Succeed())
	return p
}

// poolVM creates a claim labelled as a VM of the pool kind name.
func poolVM(t *testing.T, namespace, name, label, pool string) {
	t.Helper()
	c := builder.NewMachineClaim(name, namespace).WithTemplate(infrav1.TemplateSource{ID: "9000"}).WithHypervisorCluster("pve").
		WithBootstrapSecret(name + "-user-data").WithLabels(map[string]string{label: pool}).Build()
	NewWithT(t).Expect(env.Client.Create(context.Background(), c)).To(Succeed())
}

func listPools(t *testing.T, f *fixture, token, query string) (int, []console.Pool) {
	t.Helper()
	r := f.call(t, http.MethodGet, "/api/v1/pools"+query, token, nil)
	var l console.List[console.Pool]
	if r.Status == http.StatusOK {
		r.decode(t, &l)
	}
	return r.Status, l.Items
}

func poolKeys(pools []console.Pool) []string {
	var out []string
	for _, p := range pools {
		out = append(out, p.Kind+" "+p.Namespace+"/"+p.Name)
	}
	return out
}

func specReplicas(t *testing.T, namespace, name string) int32 {
	t.Helper()
	p := &fleetv1.VMPool{}
	NewWithT(t).Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, p)).To(Succeed())
	return *p.Spec.Replicas
}

// TestVMPoolsListedAndScaled: team-a's VMPool is listed next to a RunnerPool of the same name with
// its counts, strategy and conditions; its VMs name it; it is scaled through its /scale subresource
// with ?kind=VMPool while the RunnerPool, the default kind, is scaled on its own; a size out of the
// CRD's range and any size for a pool with spec.autoscaling are refused.
func TestVMPoolsListedAndScaled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := startConsole(t)
	tok := f.token(t, alice, fakeoidc.TokenOptions{})
	vmPool(t, teamA, "web", 3, 3, nil)
	vmPool(t, teamA, "web-auto", 2, 2, &fleetv1.VMPoolAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 6,
		TargetCPUUtilizationPercent: ptr.To[int32](60)})
	runners := builder.NewRunnerPool("web", teamA).WithCluster("fleet").WithBounds(0, 5).WithLabels("linux").Build()
	g.Expect(env.Client.Create(ctx, runners)).To(Succeed())
	poolVM(t, teamA, "web-7c9d-abcde", fleetv1.VMPoolNameLabel, "web")
	poolVM(t, teamA, "web-runner-1", fleetv1.RunnerPoolNameLabel, "web")

	status, pools := listPools(t, f, tok, "?namespace="+teamA)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(pools).To(ContainElement(And(HaveField("Kind", "VMPool"), HaveField("Namespace", teamA), HaveField("Name", "web"),
		HaveField("Cluster", "pve"), HaveField("Replicas", int32(3)), HaveField("Desired", int32(3)), HaveField("Ready", int32(3)),
		HaveField("Available", HaveValue(Equal(int32(2)))), HaveField("Updated", HaveValue(Equal(int32(3)))),
		HaveField("Min", int32(0)), HaveField("Max", int32(1000)), HaveField("Autoscaling", false),
		HaveField("Strategy", "Recreate"), HaveField("Reason", "VMsUnavailable"), HaveField("Message", "1 of the VMs is not available"),
		HaveField("ProgressingReason", "WaitingForVMs"), HaveField("ProgressingMessage", "waiting for VMs to be available"),
		HaveField("Platform", ""), HaveField("Labels", BeEmpty()), HaveField("QueuedJobs", int32(0)))))
	g.Expect(pools).To(ContainElement(And(HaveField("Kind", "VMPool"), HaveField("Name", "web-auto"), HaveField("Autoscaling", true),
		HaveField("Min", int32(2)), HaveField("Max", int32(6)))))
	g.Expect(pools).To(ContainElement(And(HaveField("Kind", "RunnerPool"), HaveField("Name", "web"), HaveField("Labels", []string{"linux"}),
		HaveField("Available", BeNil()))))

	status, pools = listPools(t, f, tok, "?namespace="+teamA+"&kind=VMPool")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(poolKeys(pools)).To(ContainElements("VMPool "+teamA+"/web", "VMPool "+teamA+"/web-auto"))
	g.Expect(poolKeys(pools)).NotTo(ContainElement("RunnerPool " + teamA + "/web"))
	status, _ = listPools(t, f, tok, "?kind=Deployment")
	g.Expect(status).To(Equal(http.StatusBadRequest))

	// The VMs name their pool and its kind; the filter tells the two pools named web apart.
	vmNames := func(query string) []string {
		r := f.call(t, http.MethodGet, "/api/v1/vms?namespace="+teamA+"&pool=web"+query, tok, nil)
		g.Expect(r.Status).To(Equal(http.StatusOK), string(r.Body))
		var l console.List[console.VM]
		r.decode(t, &l)
		var out []string
		for _, v := range l.Items {
			out = append(out, v.Name+" "+v.PoolKind+"/"+v.Pool)
		}
		return out
	}
	g.Expect(vmNames("")).To(ConsistOf("web-7c9d-abcde VMPool/web", "web-runner-1 RunnerPool/web"))
	g.Expect(vmNames("&poolKind=VMPool")).To(ConsistOf("web-7c9d-abcde VMPool/web"))
	g.Expect(vmNames("&poolKind=RunnerPool")).To(ConsistOf("web-runner-1 RunnerPool/web"))
	g.Expect(f.call(t, http.MethodGet, "/api/v1/vms?poolKind=Pool", tok, nil).Status).To(Equal(http.StatusBadRequest))

	// Scaling the VMPool goes through /scale and leaves the RunnerPool of the same name alone.
	r := f.call(t, http.MethodPatch, "/api/v1/pools/"+teamA+"/web?kind=VMPool", tok, map[string]any{"replicas": 5})
	g.Expect(r.Status).To(Equal(http.StatusOK), string(r.Body))
	var scaled console.Pool
	r.decode(t, &scaled)
	g.Expect(scaled).To(And(HaveField("Kind", "VMPool"), HaveField("Desired", int32(5))))
	g.Expect(specReplicas(t, teamA, "web")).To(Equal(int32(5)))
	p := &fleetv1.VMPool{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: teamA, Name: "web"}, p)).To(Succeed())
	g.Expect(p.ManagedFields).To(ContainElement(HaveField("Subresource", "scale")), "the size was set through /scale")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(runners), runners)).To(Succeed())
	g.Expect(runners.Spec.Replicas).To(BeNil(), "the RunnerPool web was not scaled")

	// Without a kind the RunnerPool is meant, as before VMPools were listed.
	r = f.call(t, http.MethodPatch, "/api/v1/pools/"+teamA+"/web", tok, map[string]any{"replicas": 2})
	g.Expect(r.Status).To(Equal(http.StatusOK), string(r.Body))
	r.decode(t, &scaled)
	g.Expect(scaled.Kind).To(Equal("RunnerPool"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(runners), runners)).To(Succeed())
	g.Expect(runners.Spec.Replicas).To(HaveValue(Equal(int32(2))))
	g.Expect(specReplicas(t, teamA, "web")).To(Equal(int32(5)))

	for _, body := range []map[string]any{{"replicas": -1}, {"replicas": 1001}, {}} {
		r = f.call(t, http.MethodPatch, "/api/v1/pools/"+teamA+"/web?kind=VMPool", tok, body)
		g.Expect(r.Status).To(Equal(http.StatusUnprocessableEntity), "%v: %s", body, r.Body)
		g.Expect(r.problem(t).Errors).To(ConsistOf(HaveField("Field", "replicas")))
	}
	r = f.call(t, http.MethodPatch, "/api/v1/pools/"+teamA+"/web?kind=VMPool", tok, map[string]any{"replicas": 1000})
	g.Expect(r.Status).To(Equal(http.StatusOK), "the CRD's bound itself is a size: %s", r.Body)
	r = f.call(t, http.MethodPatch, "/api/v1/pools/"+teamA+"/web?kind=VMPool", tok, map[string]any{"replicas": 0})
	g.Expect(r.Status).To(Equal(http.StatusOK), "a pool may be emptied: %s", r.Body)
	g.Expect(specReplicas(t, teamA, "web")).To(Equal(int32(0)))

	// A pool with spec.autoscaling sizes itself: a size by hand would be undone, so none is taken,
	// not even one within its bounds.
	r = f.call(t, http.MethodPatch, "/api/v1/pools/"+teamA+"/web-auto?kind=VMPool", tok, map[string]any{"replicas": 4})
	g.Expect(r.Status).To(Equal(http.StatusUnprocessableEntity), string(r.Body))
	g.Expect(r.problem(t).Detail).To(ContainSubstring("spec.autoscaling"))
	g.Expect(specReplicas(t, teamA, "web-auto")).To(Equal(int32(2)))

	r = f.call(t, http.MethodPatch, "/api/v1/pools/"+teamA+"/web?kind=Deployment", tok, map[string]any{"replicas": 1})
	g.Expect(r.Status).To(Equal(http.StatusBadRequest))
	g.Expect(r.problem(t).Errors).To(ConsistOf(HaveField("Field", "kind")))
	r = f.call(t, http.MethodPatch, "/api/v1/pools/"+teamA+"/no-such-pool?kind=VMPool", tok, map[string]any{"replicas": 1})
	g.Expect(r.Status).To(Equal(http.StatusNotFound))
}

// TestVMPoolRBAC plays the people who must not change, or see, a VMPool: bob of team-b neither
// sees team-a's pool (nor its VMs) nor scales it; vera, with view in team-a, sees it but
// Kubernetes refuses her the scale; victor's read-only role is refused by the console; rita, who
// may read team-a's RunnerPools only, still gets those.
func TestVMPoolRBAC(t *testing.T) {
	g := NewWithT(t)
	f := startConsole(t)
	vmPool(t, teamA, "guarded", 2, 2, nil)
	poolVM(t, teamA, "guarded-7c9d-fghij", fleetv1.VMPoolNameLabel, "guarded")
	vmPool(t, teamB, "bobs-pool", 1, 1, nil)
	g.Expect(env.Client.Create(context.Background(), builder.NewRunnerPool("ritas-runners", teamA).WithCluster("fleet").WithBounds(0, 3).Build())).To(Succeed())
	scale := func(who fakeoidc.User, namespace, name string, n int) response {
		return f.call(t, http.MethodPatch, "/api/v1/pools/"+namespace+"/"+name+"?kind=VMPool", f.token(t, who, fakeoidc.TokenOptions{}), map[string]any{"replicas": n})
	}

	t.Run("bob of team-b", func(t *testing.T) {
		g := NewWithT(t)
		tok := f.token(t, bob, fakeoidc.TokenOptions{})
		status, pools := listPools(t, f, tok, "")
		g.Expect(status).To(Equal(http.StatusOK))
		g.Expect(poolKeys(pools)).To(ContainElement("VMPool "+teamB+"/bobs-pool"), "bob sees his own pool")
		g.Expect(poolKeys(pools)).NotTo(ContainElement("VMPool " + teamA + "/guarded"))
		status, _ = listPools(t, f, tok, "?namespace="+teamA)
		g.Expect(status).To(Equal(http.StatusForbidden))
		r := f.call(t, http.MethodGet, "/api/v1/vms?pool=guarded&poolKind=VMPool", tok, nil)
		g.Expect(r.Status).To(Equal(http.StatusOK))
		g.Expect(string(r.Body)).NotTo(ContainSubstring("guarded"))
		r = scale(bob, teamA, "guarded", 5)
		g.Expect(r.Status).To(Equal(http.StatusForbidden), string(r.Body))
		g.Expect(r.problem(t).Title).To(Equal("Forbidden by Kubernetes RBAC"))
		// The page's form is refused the same way.
		req, _ := http.NewRequest(http.MethodPost, f.URL+"/pools/"+teamA+"/guarded/scale",
			strings.NewReader(url.Values{"kind": {"VMPool"}, "replicas": {"5"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusForbidden))
		g.Expect(scale(bob, teamB, "bobs-pool", 2).Status).To(Equal(http.StatusOK), "bob scales his own pool")
	})
	t.Run("alice cannot reach team-b's pool", func(t *testing.T) {
		g := NewWithT(t)
		tok := f.token(t, alice, fakeoidc.TokenOptions{})
		_, pools := listPools(t, f, tok, "")
		g.Expect(poolKeys(pools)).To(ContainElement("VMPool " + teamA + "/guarded"))
		g.Expect(poolKeys(pools)).NotTo(ContainElement("VMPool " + teamB + "/bobs-pool"))
		g.Expect(scale(alice, teamB, "bobs-pool", 7).Status).To(Equal(http.StatusForbidden))
	})
	t.Run("vera with view", func(t *testing.T) {
		g := NewWithT(t)
		status, pools := listPools(t, f, f.token(t, vera, fakeoidc.TokenOptions{}), "?namespace="+teamA)
		g.Expect(status).To(Equal(http.StatusOK))
		g.Expect(poolKeys(pools)).To(ContainElement("VMPool " + teamA + "/guarded"))
		r := scale(vera, teamA, "guarded", 5)
		g.Expect(r.Status).To(Equal(http.StatusForbidden), string(r.Body))
		g.Expect(r.problem(t).Title).To(Equal("Forbidden by Kubernetes RBAC"))
	})
	t.Run("victor with the read-only role", func(t *testing.T) {
		g := NewWithT(t)
		r := scale(victor, teamA, "guarded", 5)
		g.Expect(r.Status).To(Equal(http.StatusForbidden), string(r.Body))
	})
	t.Run("rita may read RunnerPools only", func(t *testing.T) {
		g := NewWithT(t)
		tok := f.token(t, rita, fakeoidc.TokenOptions{})
		for _, query := range []string{"?namespace=" + teamA, ""} {
			status, pools := listPools(t, f, tok, query)
			g.Expect(status).To(Equal(http.StatusOK), query)
			g.Expect(poolKeys(pools)).To(ContainElement("RunnerPool "+teamA+"/ritas-runners"), query)
			g.Expect(poolKeys(pools)).NotTo(ContainElement(HavePrefix("VMPool ")), query)
		}
		status, _ := listPools(t, f, tok, "?namespace="+teamA+"&kind=VMPool")
		g.Expect(status).To(Equal(http.StatusForbidden), "asked for VMPools only, the refusal is hers")
		b := newBrowser(t)
		st, page, _ := f.signIn(t, b, rita, false)
		g.Expect(st).To(Equal(http.StatusOK), page)
		st, page, _ = b.get(t, f.URL+"/pools")
		g.Expect(st).To(Equal(http.StatusOK), page)
		g.Expect(page).To(And(ContainSubstring("ritas-runners"), ContainSubstring("No VM pools you may read.")))
	})
	g.Expect(specReplicas(t, teamA, "guarded")).To(Equal(int32(2)), "team-a's pool was never scaled")
	g.Expect(specReplicas(t, teamB, "bobs-pool")).To(Equal(int32(2)))
}

// TestVMPoolsPage: the Pools page lists a VMPool with its counts and a scale form that scales it
// (an autoscaled pool has none), and the inventory shows its VMs under its name.
func TestVMPoolsPage(t *testing.T) {
	g := NewWithT(t)
	f := startConsole(t)
	vmPool(t, teamA, "page-web", 4, 4, nil)
	vmPool(t, teamA, "page-auto", 2, 2, &fleetv1.VMPoolAutoscaling{MaxReplicas: 9, TargetCPUUtilizationPercent: ptr.To[int32](50)})
	poolVM(t, teamA, "page-web-1a2b-xyzab", fleetv1.VMPoolNameLabel, "page-web")
	b := newBrowser(t)
	status, page, _ := f.signIn(t, b, alice, false)
	g.Expect(status).To(Equal(http.StatusOK), page)

	status, page, _ = b.get(t, f.URL+"/pools")
	g.Expect(status).To(Equal(http.StatusOK))
	row := tableRow(page, `data-pool="VMPool/`+teamA+`/page-web"`)
	g.Expect(row).NotTo(BeEmpty(), page)
	cell := func(field string) string {
		_, after, _ := strings.Cut(row, `data-field="`+field+`">`)
		v, _, _ := strings.Cut(after, "<")
		return v
	}
	g.Expect([]string{cell("desiredReplicas"), cell("replicas"), cell("readyReplicas"), cell("availableReplicas"), cell("updatedReplicas")}).
		To(Equal([]string{"4", "4", "4", "3", "4"}))
	g.Expect(row).To(And(ContainSubstring("VMPool"), ContainSubstring("Recreate"), ContainSubstring("WaitingForVMs"),
		ContainSubstring(`<input type="hidden" name="kind" value="VMPool">`), ContainSubstring(`action="/pools/`+teamA+`/page-web/scale"`)))
	auto := tableRow(page, `data-pool="VMPool/`+teamA+`/page-auto"`)
	g.Expect(auto).To(ContainSubstring("autoscaling 1–9"))
	g.Expect(auto).NotTo(ContainSubstring("<form"), "an autoscaled pool offers no scale form")

	csrf := csrfAttr.FindStringSubmatch(page)[1]
	resp, err := b.PostForm(f.URL+"/pools/"+teamA+"/page-web/scale", url.Values{"csrf_token": {csrf}, "kind": {"VMPool"}, "replicas": {"6"}})
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(resp.Request.URL.Path).To(Equal("/pools"), "the form returns to the Pools page")
	g.Expect(specReplicas(t, teamA, "page-web")).To(Equal(int32(6)))
	resp, err = b.PostForm(f.URL+"/pools/"+teamA+"/page-auto/scale", url.Values{"csrf_token": {csrf}, "kind": {"VMPool"}, "replicas": {"3"}})
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnprocessableEntity))
	g.Expect(specReplicas(t, teamA, "page-auto")).To(Equal(int32(2)))

	status, page, _ = b.get(t, f.URL+"/?namespace="+teamA+"&pool=page-web&poolKind=VMPool")
	g.Expect(status).To(Equal(http.StatusOK))
	vmRow := tableRow(page, `data-vm="`+teamA+`/page-web-1a2b-xyzab"`)
	g.Expect(vmRow).To(And(ContainSubstring(">page-web</a>"), ContainSubstring("VMPool")), page)
}

// tableRow is the HTML of the table row whose opening tag holds attr, empty when there is none.
func tableRow(page, attr string) string {
	i := strings.Index(page, attr)
	if i < 0 {
		return ""
	}
	row, _, _ := strings.Cut(page[i:], "</tr>")
	return row
}
