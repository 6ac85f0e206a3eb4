package placement

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/labels"
)

func sel(t *testing.T, s string) labels.Selector {
	t.Helper()
	out, err := labels.Parse(s)
	if err != nil {
		t.Fatalf("selector %q: %v", s, err)
	}
	return out
}

func TestChooseHost(t *testing.T) {
	hosts := []Host{
		{Name: "pve1", Online: true, FreeMiB: 8192, Labels: map[string]string{"rack": "a", "gpu": "true"}},
		{Name: "pve2", Online: true, FreeMiB: 32768, Labels: map[string]string{"rack": "b"}},
		{Name: "pve3", Online: true, FreeMiB: 65536, Labels: map[string]string{"rack": "b"}, Maintenance: true},
		{Name: "pve4", Online: false, FreeMiB: 65536, Labels: map[string]string{"rack": "a"}},
		{Name: "pve5", Online: true, FreeMiB: 32768, Labels: map[string]string{"rack": "a"}},
	}
	vms := []PlacedVM{
		{Name: "web-0", Host: "pve2", Labels: map[string]string{"app": "web"}},
		{Name: "db-0", Host: "pve5", Labels: map[string]string{"app": "db"}},
		{Name: "web-1", Host: "pve1", Labels: map[string]string{"app": "web"}},
	}
	cases := []struct {
		name    string
		self    string
		p       Policy
		want    string
		wantErr []string
	}{
		{name: "most free memory; maintenance and offline hosts skipped; ties by name", p: Policy{MemoryMiB: 1024}, want: "pve2"},
		{name: "host selector", p: Policy{MemoryMiB: 1024, HostSelector: sel(t, "gpu=true")}, want: "pve1"},
		{name: "host selector with set-based terms", p: Policy{MemoryMiB: 1024, HostSelector: sel(t, "rack in (a),!gpu")}, want: "pve5"},
		{name: "anti-affinity keeps web replicas apart", p: Policy{MemoryMiB: 1024, AntiAffinity: []labels.Selector{sel(t, "app=web")}}, want: "pve5"},
		{name: "affinity puts the cache next to its database", p: Policy{MemoryMiB: 1024, Affinity: []labels.Selector{sel(t, "app=db")}}, want: "pve5"},
		{name: "a VM does not repel itself", self: "web-0", p: Policy{MemoryMiB: 1024, AntiAffinity: []labels.Selector{sel(t, "app=web")}, Exclude: []string{"pve5"}}, want: "pve2"},
		{name: "capacity", p: Policy{MemoryMiB: 16384, HostSelector: sel(t, "rack=a")}, want: "pve5"},
		{name: "excluded source", p: Policy{MemoryMiB: 1024, Exclude: []string{"pve2"}}, want: "pve5"},
		{
			name: "nothing fits: every host's reason is given",
			p:    Policy{MemoryMiB: 16384, AntiAffinity: []labels.Selector{sel(t, "app in (web,db)")}},
			wantErr: []string{"pve1: 8192 MiB free, 16384 MiB needed", "pve2: runs web-0, which matches anti-affinity", "pve3: in maintenance",
				"pve4: offline", "pve5: runs db-0"},
		},
		{name: "selector matching no host", p: Policy{HostSelector: sel(t, "rack=c")}, wantErr: []string{"do not match hostSelector rack=c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ChooseHost(hosts, vms, tc.self, tc.p)
			if tc.wantErr != nil {
				g.Expect(errors.Is(err, ErrNoHost)).To(BeTrue(), "%v", err)
				for _, w := range tc.wantErr {
					g.Expect(err.Error()).To(ContainSubstring(w))
				}
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestPlanDrain(t *testing.T) {
	web := func(t *testing.T) Policy { return Policy{AntiAffinity: []labels.Selector{sel(t, "app=web")}} }
	cases := []struct {
		name      string
		hosts     []Host
		vms       []PlacedVM
		policies  func(t *testing.T) map[string]Policy
		wantMoves []Move
		wantStuck []string
	}{
		{
			name: "two web replicas leave a host and land on different hosts",
			hosts: []Host{
				{Name: "pve1", Online: true, FreeMiB: 4096},
				{Name: "pve2", Online: true, FreeMiB: 32768},
				{Name: "pve3", Online: true, FreeMiB: 16384},
			},
			vms: []PlacedVM{
				{Name: "web-0", Host: "pve1", Labels: map[string]string{"app": "web"}, MemoryMiB: 4096},
				{Name: "web-1", Host: "pve1", Labels: map[string]string{"app": "web"}, MemoryMiB: 4096},
			},
			policies:  func(t *testing.T) map[string]Policy { return map[string]Policy{"web-0": web(t), "web-1": web(t)} },
			wantMoves: []Move{{VM: "web-0", From: "pve1", To: "pve2"}, {VM: "web-1", From: "pve1", To: "pve3"}},
		},
		{
			name: "a GPU VM goes only where its device is, not to the host with the most memory",
			hosts: []Host{
				{Name: "pve1", Online: true, FreeMiB: 4096},
				{Name: "pve2", Online: true, FreeMiB: 32768},
				{Name: "pve3", Online: true, FreeMiB: 16384},
			},
			vms: []PlacedVM{{Name: "ml-0", Host: "pve1", MemoryMiB: 4096}},
			policies: func(*testing.T) map[string]Policy {
				return map[string]Policy{"ml-0": {HostReasons: map[string]string{"pve2": "has no device for PCI mapping gpu"}}}
			},
			wantMoves: []Move{{VM: "ml-0", From: "pve1", To: "pve3"}},
		},
		{
			name: "a third replica with nowhere to go stays, with the reason",
			hosts: []Host{
				{Name: "pve1", Online: true, FreeMiB: 4096},
				{Name: "pve2", Online: true, FreeMiB: 32768},
				{Name: "pve3", Online: true, FreeMiB: 16384},
			},
			vms: []PlacedVM{
				{Name: "web-0", Host: "pve1", Labels: map[string]string{"app": "web"}, MemoryMiB: 4096},
				{Name: "web-1", Host: "pve2", Labels: map[string]string{"app": "web"}, MemoryMiB: 4096},
				{Name: "web-2", Host: "pve3", Labels: map[string]string{"app": "web"}, MemoryMiB: 4096},
			},
			policies: func(t *testing.T) map[string]Policy {
				return map[string]Policy{"web-0": web(t), "web-1": web(t), "web-2": web(t)}
			},
			wantStuck: []string{"web-0"},
		},
		{
			name: "capacity is used up as VMs land: the biggest goes first",
			hosts: []Host{
				{Name: "pve1", Online: true},
				{Name: "pve2", Online: true, FreeMiB: 10240},
				{Name: "pve3", Online: true, FreeMiB: 9216},
			},
			vms: []PlacedVM{
				{Name: "small", Host: "pve1", MemoryMiB: 2048},
				{Name: "big", Host: "pve1", MemoryMiB: 8192},
				{Name: "mid", Host: "pve1", MemoryMiB: 4096},
			},
			policies: func(*testing.T) map[string]Policy { return nil },
			wantMoves: []Move{{VM: "big", From: "pve1", To: "pve2"}, {VM: "mid", From: "pve1", To: "pve3"},
				{VM: "small", From: "pve1", To: "pve3"}},
		},
		{
			name:  "a host selector is kept while draining",
			hosts: []Host{{Name: "pve1", Online: true, Labels: map[string]string{"gpu": "true"}}, {Name: "pve2", Online: true, FreeMiB: 65536}},
			vms:   []PlacedVM{{Name: "ml-0", Host: "pve1", MemoryMiB: 1024}},
			policies: func(t *testing.T) map[string]Policy {
				return map[string]Policy{"ml-0": {HostSelector: sel(t, "gpu=true")}}
			},
			wantStuck: []string{"ml-0"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			moves, stuck := PlanDrain(tc.hosts, tc.vms, "pve1", tc.policies(t))
			g.Expect(moves).To(Equal(tc.wantMoves))
			g.Expect(stuck).To(HaveLen(len(tc.wantStuck)))
			for _, name := range tc.wantStuck {
				g.Expect(stuck).To(HaveKey(name))
				g.Expect(errors.Is(stuck[name], ErrNoHost)).To(BeTrue())
			}
		})
	}
}

// TestChooseHostUnavailable: a reason the caller already knows (a linked clone's template is not
// on the host, the hypervisor refuses the move) leaves the host out and is reported as such.
func TestChooseHostUnavailable(t *testing.T) {
	g := NewWithT(t)
	hosts := []Host{
		{Name: "pve1", Online: true, FreeMiB: 65536, Unavailable: "holds no copy of the template"},
		{Name: "pve2", Online: true, FreeMiB: 8192},
	}
	got, err := ChooseHost(hosts, nil, "", Policy{MemoryMiB: 1024})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal("pve2"))

	_, err = ChooseHost(hosts, nil, "", Policy{MemoryMiB: 16384})
	g.Expect(errors.Is(err, ErrNoHost)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("pve1: holds no copy of the template"))
	g.Expect(err.Error()).To(ContainSubstring("pve2: 8192 MiB free, 16384 MiB needed"))
}
