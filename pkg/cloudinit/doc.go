// Package cloudinit merges cloud-init user-data: a template's #cloud-config under a VM's bootstrap
// data, and builds the NoCloud meta-data that names the VM and the NoCloud seed ISO that carries
// both. One VM gets one data source, so everything it needs has to be in one document.
package cloudinit
