// Package module embeds HyperFleetHyperV, the PowerShell module HyperFleet deploys to every Hyper-V
// host and calls for each operation, and says which version and content the provider expects there.
package module

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
)

// Name is the module's name, its folder's and its files' base name.
const Name = "HyperFleetHyperV"

// Version is the ModuleVersion in HyperFleetHyperV.psd1. Raise it with every change to the module:
// a host with another version gets this one on the next connect.
const Version = "1.5.0"

//go:embed HyperFleetHyperV.psm1
var script []byte

//go:embed HyperFleetHyperV.psd1
var manifest []byte

// Script is the module's code (HyperFleetHyperV.psm1).
func Script() []byte { return script }

// Manifest is the module manifest (HyperFleetHyperV.psd1).
func Manifest() []byte { return manifest }

// ScriptSHA256 is the lower-case hex SHA-256 of Script, as Get-FileHash reports it (lower-cased).
func ScriptSHA256() string {
	sum := sha256.Sum256(script)
	return hex.EncodeToString(sum[:])
}
