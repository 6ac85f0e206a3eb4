// Package spire runs the local fleet with VMs attested by SPIRE (a real spire-server, a spire-agent
// per VM and one for the bootstrap service) and checks the whole loop: webhooks scale the pool,
// every job runs once on a SPIRE-attested VM, and the SPIRE server forgets each Machine that goes.
package spire
