// Package builder has small fluent builders of HyperFleet objects for tests: each starts from the
// smallest valid object, and With* methods change one thing.
package builder
