// Package winrmclient is HyperFleet's WS-Management (WinRM) client for Hyper-V hosts: it runs
// PowerShell scripts through powershell.exe -EncodedCommand, uploads files in chunks that fit
// cmd.exe's command-line limit, and classifies failures into package hypervisor's errors.
package winrmclient
