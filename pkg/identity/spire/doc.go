// Package spire is the SPIRE identity provider: for each Machine it asks a SPIRE server, through
// its admin API, for a single-use join token and a registration entry that gives the VM's workload
// the Machine's SPIFFE ID. The VM runs spire-agent with that token; SPIRE, not HyperFleet, then
// redeems the token and issues the X509-SVIDs.
package spire
