package fakebuildkite_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/buildkite/agent/v3/api"
	"github.com/buildkite/agent/v3/logger"
	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/fakebuildkite"
)

// agentAPIClient is buildkite-agent's own API client (github.com/buildkite/agent/v3/api), as
// `buildkite-agent start` builds it: the endpoint, a token, and TLS trust for the fake's
// certificate. Its transport sets "Authorization: Token <token>" itself.
func agentAPIClient(t *testing.T, s *fakebuildkite.Server, token string) *api.Client {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.CACertPEM()) {
		t.Fatal("the fake's certificate does not parse")
	}
	return api.NewClient(logger.Discard, api.Config{
		Endpoint:  s.AgentEndpoint() + "/",
		Token:     token,
		UserAgent: "buildkite-agent/3.95.1 (linux; amd64)",
		TLSConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	})
}

// TestAgentAPIWithBuildkiteAgentsClient: the agent's lifecycle as buildkite-agent runs it, with
// its own api package (api/agents.go, api/pings.go, api/heartbeats.go, api/jobs.go): register
// with the agent token, then with the access token connect, heartbeat, ping for the job its
// tags match, accept, start, poll the job's state, finish and disconnect. Errors decode into
// the agent's *api.ErrorResponse.
func TestAgentAPIWithBuildkiteAgentsClient(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true})
	other := s.CreateJob("api", []string{"queue=windows"})
	mine := s.CreateJob("api", []string{"queue=linux"})
	tok := s.AddClusterToken("vm")

	_, resp, err := agentAPIClient(t, s, "forged").Register(ctx, &api.AgentRegisterRequest{Name: "vm-1", Tags: []string{"queue=linux"}})
	var er *api.ErrorResponse
	g.Expect(errors.As(err, &er)).To(BeTrue())
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(er.Message).NotTo(BeEmpty())

	reg, _, err := agentAPIClient(t, s, tok.Value).Register(ctx, &api.AgentRegisterRequest{
		Name: "vm-1", Hostname: "vm-1", OS: "linux", Arch: "amd64", Version: "3.95.1", Build: "1",
		Tags: []string{"queue=linux", "os=linux"}, Features: []string{},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reg.UUID).NotTo(BeEmpty())
	g.Expect(reg.AccessToken).NotTo(BeEmpty())
	g.Expect(reg.Endpoint).To(Equal(s.AgentEndpoint()))
	g.Expect(reg.PingInterval).To(BeNumerically(">", 0))
	g.Expect(reg.HeartbeatInterval).To(BeNumerically(">", 0))
	g.Expect(reg.Tags).To(Equal([]string{"queue=linux", "os=linux"}))

	// As the agent does: a client for the endpoint and access token the registration returned.
	a := agentAPIClient(t, s, tok.Value).FromAgentRegisterResponse(reg)
	_, err = a.Connect(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	hb, _, err := a.Heartbeat(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hb.ReceivedAt).NotTo(BeEmpty())

	ping, _, err := a.Ping(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ping.Action).To(BeEmpty())
	g.Expect(ping.Job).NotTo(BeNil())
	g.Expect(ping.Job.ID).To(Equal(mine.ID), "not the windows queue's job")
	g.Expect(ping.Job.Env).To(HaveKeyWithValue("BUILDKITE_JOB_ID", mine.ID))

	job, _, err := a.AcceptJob(ctx, ping.Job)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(job.ID).To(Equal(mine.ID))
	g.Expect(job.State).To(Equal("accepted"))
	job.StartedAt = time.Now().UTC().Format(time.RFC3339Nano)
	_, err = a.StartJob(ctx, job)
	g.Expect(err).NotTo(HaveOccurred())
	state, _, err := a.GetJobState(ctx, job.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(state.State).To(Equal("running"))
	_, _, err = a.GetJobState(ctx, other.ID)
	g.Expect(errors.As(err, &er)).To(BeTrue())
	g.Expect(er.Response.StatusCode).To(Equal(http.StatusNotFound), "another agent's job is not this agent's to read")

	job.ExitStatus, job.FinishedAt = "0", time.Now().UTC().Format(time.RFC3339Nano)
	_, err = a.FinishJob(ctx, job)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = a.FinishJob(ctx, job)
	g.Expect(errors.As(err, &er)).To(BeTrue())
	g.Expect(er.Response.StatusCode).To(Equal(http.StatusUnprocessableEntity), "a finished job is not finished twice")

	ping, _, err = a.Ping(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ping.Job).To(BeNil(), "the other queue's job is not this agent's")
	_, err = a.Disconnect(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	done, _ := s.GetJob(mine.ID)
	g.Expect(done.State).To(Equal(fakebuildkite.JobFinished))
	g.Expect(*done.ExitStatus).To(Equal(0))
	g.Expect(done.Acquisitions).To(Equal(1))
}
