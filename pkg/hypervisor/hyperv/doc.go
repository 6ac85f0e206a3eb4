// Package hyperv implements hypervisor.Provider for Hyper-V hosts reached over WinRM. Every
// operation is one call of HyperFleetHyperV, a versioned PowerShell module the provider deploys to
// each host on connect (package module), with a base64 JSON argument and a JSON answer written
// for Windows PowerShell 5.1, whose quirks the decoder also accepts. Linked clones are
// differencing disks on a template's VHDX, ownership lives in the VM's Notes (checked again by
// the module on the host before any change), cloud-init data goes in as a NoCloud seed ISO on a
// DVD drive, and VMs are known by host and GUID. Networks are internal switches or VLANs on an
// uplink with port ACLs per adapter (network.go), storages are marked folders (storage.go) that
// take a full clone's copy of its template's disk and extra disks.
package hyperv
