// Package realguest runs HyperFleet's runner loop against a real Linux guest: the local fleet with
// the Proxmox simulator's QEMU backend boots the runner template hack/template.sh builds, so real
// cloud-init reads HyperFleet's seed ISO, systemd starts the real agent, the agent attests over the
// guest's network and powers the guest off. Afterwards the test reads the guest's disk for every
// secret the loop handled. The tests skip, saying why, only where QEMU or the template cannot be
// had; hack/template.sh builds the template once and caches it. HYPERFLEET_GUEST_IMAGE boots
// another qcow2 image instead (one with cloud-init, the QEMU guest agent and the agent at
// /usr/local/bin/hyperfleet-agent).
package realguest
