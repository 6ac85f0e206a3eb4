// Package lifecycle decides what HyperFleet does with a persistent VM's power: from its observed
// power state, how it last stopped, its run strategy and any pending power request, it answers
// start, stop or nothing. It is pure so every case is a row of a table test.
package lifecycle
