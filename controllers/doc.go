// Package controllers holds HyperFleet's reconcilers, one per kind. They stay thin: each reads the
// object, orders small steps that each own one condition, and leaves the logic to pkg/.
package controllers
