package identity

import (
	"fmt"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// DefaultTrustDomain is used when a BootstrapConfig names none.
const DefaultTrustDomain = "hyperfleet.local"

// machinePathPrefix starts the path of every machine SVID; the rest is /<namespace>/<machine>.
const machinePathPrefix = "/hyperfleet/machine/"

// bootstrapServicePath is the path of the bootstrap service's own SVID, which agents authorize.
const bootstrapServicePath = "/hyperfleet/bootstrap-service"

// MachineID is the SPIFFE ID a Machine's VM holds once attested:
// spiffe://<trust-domain>/hyperfleet/machine/<namespace>/<machine>.
func MachineID(td spiffeid.TrustDomain, namespace, machine string) (spiffeid.ID, error) {
	if namespace == "" || machine == "" {
		return spiffeid.ID{}, fmt.Errorf("machine SPIFFE ID needs a namespace and a name, got %q/%q", namespace, machine)
	}
	return spiffeid.FromSegments(td, "hyperfleet", "machine", namespace, machine)
}

// ParseMachineID returns the namespace and Machine name of a machine SPIFFE ID in td, or an error
// for any other ID: callers use it to refuse SVIDs that do not name a machine.
func ParseMachineID(td spiffeid.TrustDomain, id spiffeid.ID) (namespace, machine string, err error) {
	if id.TrustDomain() != td {
		return "", "", fmt.Errorf("SPIFFE ID %s is not in trust domain %s", id, td)
	}
	rest, ok := strings.CutPrefix(id.Path(), machinePathPrefix)
	if !ok {
		return "", "", fmt.Errorf("SPIFFE ID %s does not name a machine", id)
	}
	namespace, machine, ok = strings.Cut(rest, "/")
	if !ok || namespace == "" || machine == "" || strings.Contains(machine, "/") {
		return "", "", fmt.Errorf("SPIFFE ID %s does not name a machine", id)
	}
	return namespace, machine, nil
}

// BootstrapServiceID is the SPIFFE ID the bootstrap service presents; agents accept no other.
func BootstrapServiceID(td spiffeid.TrustDomain) spiffeid.ID {
	return spiffeid.RequireFromPath(td, bootstrapServicePath)
}
