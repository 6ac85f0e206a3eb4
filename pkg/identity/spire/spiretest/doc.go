// Package spiretest runs real spire-server and spire-agent processes (built by hack/spire.sh) for
// tests: a server on loopback with its admin API on a Unix socket, agents configured exactly as a
// VM's bootstrap data configures them, and the registration calls an operator would make.
package spiretest
