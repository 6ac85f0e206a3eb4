// Package fakeserver holds what the project's fake CI platforms share: a loopback listener with
// an optional self-signed certificate (so tests exercise HyperFleet's CA-bundle settings), a
// transport trusting only that certificate, and an ordered background queue for webhook
// deliveries. Each fake keeps its own routes, payloads and signing.
package fakeserver
