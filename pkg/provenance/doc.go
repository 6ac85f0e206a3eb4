// Package provenance signs each finished job's record as an in-toto Statement in a DSSE envelope
// and verifies such envelopes with nothing but the installation's public keys, so a record can be
// checked long after its VM, claim and Machine are gone. It depends on the standard library only:
// the verifier command links it without Kubernetes.
package provenance
