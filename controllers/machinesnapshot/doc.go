// Package machinesnapshot is the MachineSnapshot controller: it takes one hypervisor snapshot of a
// persistent claim's VM per MachineSnapshot, records it in the object's status, and removes it
// from the hypervisor when the object is deleted (deletionPolicy Delete).
package machinesnapshot
