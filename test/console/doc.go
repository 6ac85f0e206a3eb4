// Package console tests HyperFleet's operator console as people and attackers use it: over HTTP
// against a real API server (RBAC on, the console with its shipped ServiceAccount permissions and
// real impersonation), the Proxmox VE simulator and an in-process OIDC issuer; and, with headless
// Chromium, through the web UI.
package console
