// Package agent is the logic of hyperfleet-agent, the program inside each runner VM: it attests
// with its single-use join token, fetches its one-time runner config over mTLS, installs and runs
// the CI runner for exactly one job, and powers the VM off. Credentials stay in memory.
package agent
