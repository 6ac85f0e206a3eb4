// Package fakeserver holds what the project's fake CI platforms share: a loopback listener with
// an optional self-signed certificate (so tests exercise HyperFleet's CA-bundle settings), the
// HTTPServer that serves a fake's handler on it, a transport trusting only that certificate, an
// ordered background queue for webhook deliveries and the POST that sends one. Each fake keeps
// its own routes, payloads, headers and signing.
package fakeserver
