// Package logging builds HyperFleet's structured logger from LOG_LEVEL (DEBUG, INFO, WARN, ERROR), so
// every binary logs the same JSON shape through logr.
package logging
