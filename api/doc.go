// Package api gathers HyperFleet's API groups so programs and tests can register them with one call.
package api
