// Package config holds the manager's settings. Each has a default, an environment variable (so a
// ConfigMap can set it through envFrom) and a flag; a flag given on the command line wins.
package config
