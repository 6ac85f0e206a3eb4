// Package gitlab runs the local fleet with a GitLab pool (a fake GitLab, a group pool whose VMs
// run gitlab-runner run-single) and checks the whole loop: Job Hooks scale the pool, every job
// runs once on its own VM, and the pool, its runners and VMs go back to the floor.
package gitlab
