package spire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffegrpc/grpccredentials"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// DialOptions say how to authenticate to a SPIRE server's admin API over TCP. The Unix socket needs
// none: whoever can open it is an admin, as with `spire-server -socketPath`.
type DialOptions struct {
	// WorkloadAPIAddress is the SPIFFE Workload API (e.g. unix:///run/spire/agent/public/api.sock)
	// that gives HyperFleet its own X509-SVID, which the SPIRE server must know as an admin
	// (admin_ids, or an entry with admin = true). Empty means SPIFFE_ENDPOINT_SOCKET.
	WorkloadAPIAddress string
	// ServerID is the SPIFFE ID the server must present; empty means
	// spiffe://<HyperFleet's own trust domain>/spire/server.
	ServerID spiffeid.ID
}

// sourceTimeout bounds the wait for HyperFleet's own SVID when dialling over TCP.
const sourceTimeout = 15 * time.Second

// IsUnixAddress reports whether address names the server's local admin socket (unix:///path).
func IsUnixAddress(address string) bool { return strings.HasPrefix(address, "unix:") }

// dial connects to the admin API at address: unix:///path, or host:port with mTLS. The returned
// closer releases the connection and, over TCP, the SVID source.
func dial(ctx context.Context, address string, opts DialOptions) (*grpc.ClientConn, io.Closer, error) {
	if address == "" {
		return nil, nil, errors.New("no SPIRE server address")
	}
	if IsUnixAddress(address) {
		if !strings.HasPrefix(address, "unix:///") {
			return nil, nil, fmt.Errorf("SPIRE server address %q: a Unix socket is written unix:///absolute/path", address)
		}
		conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, nil, err
		}
		return conn, conn, nil
	}
	var sourceOpts []workloadapi.X509SourceOption
	if opts.WorkloadAPIAddress != "" {
		sourceOpts = append(sourceOpts, workloadapi.WithClientOptions(workloadapi.WithAddr(opts.WorkloadAPIAddress)))
	}
	// Without a Workload API the source would wait forever; a reconcile must not.
	sourceCtx, cancel := context.WithTimeout(ctx, sourceTimeout)
	defer cancel()
	source, err := workloadapi.NewX509Source(sourceCtx, sourceOpts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: HyperFleet's own SVID for mTLS to the SPIRE server: %v", ErrUnavailable, err)
	}
	serverID := opts.ServerID
	if serverID.IsZero() {
		svid, err := source.GetX509SVID()
		if err != nil {
			_ = source.Close()
			return nil, nil, err
		}
		serverID, err = spiffeid.FromSegments(svid.ID.TrustDomain(), "spire", "server")
		if err != nil {
			_ = source.Close()
			return nil, nil, err
		}
	}
	creds := grpccredentials.MTLSClientCredentials(source, source, tlsconfig.AuthorizeID(serverID))
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(creds))
	if err != nil {
		_ = source.Close()
		return nil, nil, err
	}
	return conn, closers{conn, source}, nil
}

type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
