// Package manager assembles HyperFleet's controller manager: the scheme, caches, metrics and health
// endpoints, leader election and every controller. Programs and tests start the same manager.
package manager
