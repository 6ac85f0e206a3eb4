// Package service is the bootstrap service, the only endpoint runner VMs talk to. A VM attests
// with its single-use join token and a CSR (POST /v1/attest), then, authenticated by the X509-SVID it
// received, fetches its one-time runner config over mTLS (GET /v1/runner-config). All state is in
// the API server, so the service runs as several replicas without the manager.
package service
