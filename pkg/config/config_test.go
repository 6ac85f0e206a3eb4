package config

import (
	"flag"
	"io"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func parse(args []string, env map[string]string) (*Manager, error) {
	m := &Manager{}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	check := m.Bind(fs, func(k string) string { return env[k] })
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return m, check()
}

func TestDefaults(t *testing.T) {
	g := NewWithT(t)
	m, err := parse(nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.LogLevel).To(Equal("INFO"))
	g.Expect(m.MetricsBindAddress).To(Equal(":8080"))
	g.Expect(m.HealthProbeBindAddress).To(Equal(":8081"))
	g.Expect(m.OTelServiceName).To(Equal("hyperfleet-operator"))
	g.Expect(m.SweepInterval).To(Equal(30 * time.Second))
	g.Expect(m.MetricsSecure).To(BeTrue())
}

func TestEnvironmentThenFlags(t *testing.T) {
	env := map[string]string{
		"LOG_LEVEL":            "DEBUG",
		"METRICS_BIND_ADDRESS": ":9999",
		"OTEL_SERVICE_NAME":    "fleet-a",
		"SWEEP_INTERVAL":       "5s",
		"LEADER_ELECT":         "true",
	}
	cases := []struct {
		name string
		args []string
		want func(g Gomega, m *Manager)
	}{
		{"environment sets defaults", nil, func(g Gomega, m *Manager) {
			g.Expect(m.LogLevel).To(Equal("DEBUG"))
			g.Expect(m.MetricsBindAddress).To(Equal(":9999"))
			g.Expect(m.OTelServiceName).To(Equal("fleet-a"))
			g.Expect(m.SweepInterval).To(Equal(5 * time.Second))
			g.Expect(m.LeaderElect).To(BeTrue())
		}},
		{"flags override the environment", []string{"--log-level=ERROR", "--metrics-bind-address=:7000", "--leader-elect=false"}, func(g Gomega, m *Manager) {
			g.Expect(m.LogLevel).To(Equal("ERROR"))
			g.Expect(m.MetricsBindAddress).To(Equal(":7000"))
			g.Expect(m.LeaderElect).To(BeFalse())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			m, err := parse(tc.args, env)
			g.Expect(err).NotTo(HaveOccurred())
			tc.want(g, m)
		})
	}
}

func TestInvalidValues(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"bad duration in env", nil, map[string]string{"SWEEP_INTERVAL": "soon"}, "SWEEP_INTERVAL=\"soon\": not a duration"},
		{"bad boolean in env", nil, map[string]string{"LEADER_ELECT": "maybe"}, "not a boolean"},
		{"zero concurrency", []string{"--concurrency=0"}, nil, "concurrency must be at least 1"},
		{"tiny sweep interval", []string{"--sweep-interval=10ms"}, nil, "sweep-interval must be at least 1s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := parse(tc.args, tc.env)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}
