package hyperv

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/hyperv/module"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/hyperv/winrmclient"
)

// The scripts HyperFleet sends to a host. There are three shapes, no more, and the WS-Man
// simulator accepts exactly these: a module call, the module probe and the directory preparation
// before a deploy (the module's files themselves go up with the WinRM client's Upload). Each is
// golden-tested (testdata/*.golden). No value a HypervisorCluster sets enters a script as text:
// a module call's input is base64 JSON, and the folders travel as base64 text (psText).

// Module functions.
const (
	fnInventory    = "Get-HFInventory"
	fnVM           = "Get-HFVM"
	fnFindTemplate = "Find-HFTemplate"
	fnNewVM        = "New-HFVM"
	fnSetVM        = "Set-HFVM"
	fnStartVM      = "Start-HFVM"
	fnStopVM       = "Stop-HFVM"
	fnRemoveVM     = "Remove-HFVM"
	fnDismountSeed = "Dismount-HFSeed"
)

// psText is a PowerShell expression whose value is s, with s sent as base64: whatever a
// HypervisorCluster's folder holds (a quote of any kind, a line break), the script's text is the
// same apart from the base64 letters, so no value can end a string and be run as a command.
func psText(s string) string {
	return "[Text.Encoding]::UTF8.GetString([Convert]::FromBase64String(" + winrmclient.PSQuote(base64.StdEncoding.EncodeToString([]byte(s))) + "))"
}

// moduleDir is where this version of the module lives on a host: one folder per version, so a
// deploy never rewrites files another manager's call is importing.
func moduleDir(root string) string {
	return strings.TrimRight(root, `\`) + `\` + module.Name + `\` + module.Version
}

// callScript is the script that runs one module function with input as its JSON argument.
func callScript(root, function string, input any) (string, error) {
	raw, err := json.Marshal(input)
	if err != nil {
		return "", fmt.Errorf("encode %s input: %w", function, err)
	}
	return "$ErrorActionPreference = 'Stop'\n" +
		"Import-Module -Name (" + psText(moduleDir(root)+`\`+module.Name+".psd1") + ") -RequiredVersion " + winrmclient.PSQuote(module.Version) + "\n" +
		function + " -InputBase64 " + winrmclient.PSQuote(base64.StdEncoding.EncodeToString(raw)) + "\n", nil
}

// probeScript reports the version and the script's SHA-256 of the module installed in this
// version's folder, or empty strings when it is not there.
func probeScript(root string) string {
	return "$ErrorActionPreference = 'Stop'\n" +
		"$dir = " + psText(moduleDir(root)) + "\n" +
		"$r = @{ Version = ''; Sha256 = '' }\n" +
		"$psd = Join-Path $dir " + winrmclient.PSQuote(module.Name+".psd1") + "\n" +
		"$psm = Join-Path $dir " + winrmclient.PSQuote(module.Name+".psm1") + "\n" +
		"if ((Test-Path -LiteralPath $psd) -and (Test-Path -LiteralPath $psm)) {\n" +
		"    $r.Version = [string](Import-PowerShellDataFile -Path $psd).ModuleVersion\n" +
		"    $r.Sha256 = (Get-FileHash -LiteralPath $psm -Algorithm SHA256).Hash.ToLowerInvariant()\n" +
		"}\n" +
		"ConvertTo-Json -InputObject $r -Compress\n"
}

// prepareScript creates the folders HyperFleet writes to: the module's and the seed ISOs'.
func prepareScript(dirs ...string) string {
	texts := make([]string, len(dirs))
	for i, d := range dirs {
		texts[i] = psText(d)
	}
	return "$ErrorActionPreference = 'Stop'\n" +
		"foreach ($d in @(" + strings.Join(texts, ", ") + ")) { New-Item -ItemType Directory -Force -Path $d | Out-Null }\n"
}
