// Package capacity is the in-process queue that keeps HyperFleet within what a hypervisor
// cluster can do at once: a slot per clone (per host and per storage) and per delete (per host),
// handed out fairly across pools and oldest first within a pool; the line of claims waiting for
// memory to free; and a cluster-wide backoff after lock timeouts and refused calls. It holds no
// Kubernetes types, so its invariants are tested on their own.
package capacity
