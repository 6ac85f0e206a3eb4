// Command pause is the pod sandbox of the test node: it holds a pod's namespaces and exits on
// SIGTERM or SIGINT, as Kubernetes' own pause does. The node builds it into an image of its own
// because no image is ever pulled there.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	// A sandbox that shares its PID namespace is PID 1 and must reap orphans.
	signal.Ignore(syscall.SIGCHLD)
	<-sig
}
