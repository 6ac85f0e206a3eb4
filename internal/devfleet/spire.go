package devfleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"

	"github.com/hyperfleet-io/hyperfleet/internal/spirelocal"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/service"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

// SPIREState is the fleet's SPIRE server when VMs are attested by SPIRE.
type SPIREState struct {
	// AdminAddress is the server's admin API socket (spire-server ... -socketPath).
	AdminAddress string `json:"adminAddress"`
	// AgentServerAddress is where VMs' spire-agent attests (host:port).
	AgentServerAddress string `json:"agentServerAddress"`
}

// spireBinaries finds spire-server and spire-agent in the tools cache (hack/spire.sh).
func spireBinaries() (server, agent string, err error) {
	cache, err := testenv.ToolsCacheDir()
	if err != nil {
		return "", "", err
	}
	return spirelocal.Bins(filepath.Join(cache, "spire"))
}

// startSPIRE runs what a cluster using SPIRE has: a spire-server, a spire-agent (the node agent)
// that gives the bootstrap service its SVID under the ID VMs accept, and the bootstrap service's
// SPIRE endpoint. The server's and agents' sockets live in a short temporary directory (Unix
// socket paths are limited); their logs go next to the others.
func (f *Fleet) startSPIRE(ctx, runCtx context.Context) error {
	serverBin, _, err := spireBinaries()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "hf-spire-")
	if err != nil {
		return err
	}
	f.stops = append(f.stops, func() { _ = os.RemoveAll(dir) })
	td := spiffeid.RequireTrustDomainFromString(TrustDomain)
	serverLog, err := f.logFile("spire-server.log")
	if err != nil {
		return err
	}
	server, err := spirelocal.StartServer(ctx, serverBin, filepath.Join(dir, "server"), td, serverLog)
	if err != nil {
		return err
	}
	f.stops = append(f.stops, func() { _ = server.Close() })
	f.SPIREServer = server

	// The operator's part: register the bootstrap service under the only ID VMs accept.
	token, err := server.JoinToken(ctx, 10*time.Minute)
	if err != nil {
		return err
	}
	if err := server.Register(ctx, identity.BootstrapServiceID(td), token, spirelocal.UIDSelector()); err != nil {
		return err
	}
	nodeLog, err := f.logFile("spire-agent-node.log")
	if err != nil {
		return err
	}
	node, workloadAPI, err := server.StartAgent(ctx, "spire-agent (node)", f.spireAgentBin, filepath.Join(dir, "node"), token, nodeLog)
	if err != nil {
		return err
	}
	f.stops = append(f.stops, func() { _ = node.Stop() })
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	source, err := workloadapi.NewX509Source(waitCtx, workloadapi.WithClientOptions(workloadapi.WithAddr(workloadAPI)))
	if err != nil {
		return fmt.Errorf("the bootstrap service's SVID from the node's spire-agent: %w", err)
	}
	f.stops = append(f.stops, func() { _ = source.Close() })
	c, err := f.bootstrapServiceClient()
	if err != nil {
		return err
	}
	srv, err := service.New(service.Options{Client: c, SPIRE: source, Platforms: f.platforms(c), Logger: f.log.WithName("bootstrap-service-spire")})
	if err != nil {
		return err
	}
	if f.State.Bootstrap.SPIREURL, err = srv.Start(runCtx, "127.0.0.1:0"); err != nil {
		return err
	}
	f.State.SPIRE = &SPIREState{AdminAddress: server.Address, AgentServerAddress: "127.0.0.1:" + strconv.Itoa(server.Port)}
	return nil
}

// logFile creates a log file for a component in the log directory; it is closed on stop.
func (f *Fleet) logFile(name string) (*os.File, error) {
	w, err := os.Create(filepath.Join(f.State.LogDir, name))
	if err != nil {
		return nil, err
	}
	f.stops = append(f.stops, func() { _ = w.Close() })
	return w, nil
}
