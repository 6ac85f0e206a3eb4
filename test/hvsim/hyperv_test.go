package hvsim

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
)

func encoded(script string) string {
	u := utf16.Encode([]rune("$ProgressPreference = 'SilentlyContinue';" + script))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(b[2*i:], c)
	}
	return "powershell.exe -EncodedCommand " + base64.StdEncoding.EncodeToString(b)
}

const (
	testPsd1   = `C:\ProgramData\HyperFleet\Modules\HyperFleetHyperV\1.0.0\HyperFleetHyperV.psd1`
	testModule = "@{\n    ModuleVersion     = '1.0.0'\n    FunctionsToExport = @(\n        'Get-HFInventory'\n    )\n}\n"
)

func inventoryCall(version string) string {
	return "$ErrorActionPreference = 'Stop'\nImport-Module -Name (" + textOf(testPsd1) + ") -RequiredVersion '" + version + "'\nGet-HFInventory -InputBase64 'e30='\n"
}

// textOf is s the way the provider sends a folder: base64 text decoded on the host.
func textOf(s string) string {
	return "[Text.Encoding]::UTF8.GetString([Convert]::FromBase64String('" + base64.StdEncoding.EncodeToString([]byte(s)) + "'))"
}

// TestHyperVRefusesWhatPowerShellWould: scripts outside the provider's shapes, calls before the
// module is deployed or of another version, and non-PowerShell command lines fail as Windows would.
func TestHyperVRefusesWhatPowerShellWould(t *testing.T) {
	hv := NewHyperV(HyperVConfig{})
	hv.AddHost("hv1", 4, 8192)
	run := func(cmd string) (string, string, int) {
		out, errOut, code := hv.Executor("hv1").Run(context.Background(), "u", cmd, nil)
		return string(out), string(errOut), code
	}
	for name, tc := range map[string]struct{ cmd, want string }{
		"unknown script":       {encoded("Remove-Item C:\\ -Recurse"), "The term 'Remove-Item' is not recognized"},
		"before deploy":        {encoded(inventoryCall("1.0.0")), "Modules_ModuleWithVersionNotFound"},
		"call with extra line": {encoded(inventoryCall("1.0.0") + "Stop-Computer\n"), "is not recognized"},
	} {
		_, errOut, code := run(tc.cmd)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and %q", name, code, errOut, tc.want)
		}
	}
	if err := hv.InstallModule("hv1", `C:\ProgramData\HyperFleet\Modules\HyperFleetHyperV\1.0.0`, map[string][]byte{
		"HyperFleetHyperV.psd1": []byte(testModule), "HyperFleetHyperV.psm1": []byte("#"),
	}); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := run(encoded(inventoryCall("1.0.1"))); code != 1 || !strings.Contains(errOut, "with version '1.0.1'") {
		t.Errorf("another version: exit %d, %q", code, errOut)
	}
	if _, errOut, code := run(encoded(strings.Replace(inventoryCall("1.0.0"), "Get-HFInventory", "Get-HFSecrets", 1))); code != 1 || !strings.Contains(errOut, "Get-HFSecrets") {
		t.Errorf("a function the manifest does not export: exit %d, %q", code, errOut)
	}
	out, errOut, code := run(encoded(inventoryCall("1.0.0")))
	if code != 0 || errOut != "" || !strings.HasPrefix(out, `{"Data":{"Host":`) {
		t.Errorf("deployed: exit %d, %q, %q", code, out, errOut)
	}
	if !strings.HasPrefix(errOutOf(hv), "#< CLIXML\r\n<Objs") {
		t.Errorf("errors are not CLIXML")
	}
}

// TestHyperVRecordsForeignStatements: a script that is none of HyperFleet's has its statements
// recorded as PowerShell would split them, so a typographic quote that ends a path's string
// shows the command after it; HyperFleet's own scripts record nothing.
func TestHyperVRecordsForeignStatements(t *testing.T) {
	hv := NewHyperV(HyperVConfig{})
	hv.AddHost("hv1", 4, 8192)
	injected := "$ErrorActionPreference = 'Stop'\n$dir = 'C:\\HF\u2019; Stop-VM -Name db -TurnOff; \u2019x\\HyperFleetHyperV\\1.0.0'\n"
	hv.Executor("hv1").Run(context.Background(), "u", encoded(injected), nil)
	hv.Executor("hv1").Run(context.Background(), "u", encoded(inventoryCall("1.0.0")), nil)
	got := hv.ForeignStatements("hv1")
	want := []string{"$ErrorActionPreference = 'Stop'", "$dir = 'C:\\HF\u2019", "Stop-VM -Name db -TurnOff", "\u2019x\\HyperFleetHyperV\\1.0.0'"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("foreign statements %q, want %q", got, want)
	}
}

func errOutOf(hv *HyperV) string {
	_, errOut, _ := hv.Executor("hv1").Run(context.Background(), "u", encoded("Get-Nothing"), nil)
	return string(errOut)
}

// TestHyperVPS51Shapes: with PS51Quirks, one-element arrays come unwrapped, empty ones as null and
// dates as /Date(ms)/, as 5.1 writes values a script does not force.
func TestHyperVPS51Shapes(t *testing.T) {
	hv := NewHyperV(HyperVConfig{PS51Quirks: true})
	hv.AddHost("hv1", 4, 8192)
	if _, err := hv.AddVM("hv1", "only", "", false); err != nil {
		t.Fatal(err)
	}
	if err := hv.InstallModule("hv1", `C:\ProgramData\HyperFleet\Modules\HyperFleetHyperV\1.0.0`, map[string][]byte{
		"HyperFleetHyperV.psd1": []byte(testModule), "HyperFleetHyperV.psm1": []byte("#"),
	}); err != nil {
		t.Fatal(err)
	}
	out, _, _ := hv.Executor("hv1").Run(context.Background(), "u", encoded(inventoryCall("1.0.0")), nil)
	for _, want := range []string{`"VMs":{`, `"CreationTime":"/Date(`, `"IPAddresses":null`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("answer %s lacks %s", out, want)
		}
	}
}

// TestHyperVGuestPowerOffEndsTheBoot: a guest that powers itself off turns the VM off and ends its
// boot hook's context, so nothing waits on a halted guest.
func TestHyperVGuestPowerOffEndsTheBoot(t *testing.T) {
	ended := make(chan struct{})
	hv := NewHyperV(HyperVConfig{BootHook: func(ctx context.Context, vm HyperVBootVM) error {
		vm.PowerOff()
		<-ctx.Done()
		close(ended)
		return nil
	}})
	hv.AddHost("hv1", 4, 8192)
	hh := hv.hosts["hv1"]
	vm := hh.newVM("guest", `C:\VMs`)
	vm.notes = "```hyperfleet\nmanaged-by: hyperfleet\ninstallation: i\nowner-tag: o\n```"
	hv.mu.Lock()
	_, err := hv.startVM(hh, hvInput{ID: vm.id, Expect: struct{ Installation, OwnerTag, ClaimID string }{"i", "o", ""}})
	hv.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the boot hook's context did not end when the guest powered off")
	}
	hv.Close()
	if got := hv.VMs("hv1")[0].State; got != hvOff {
		t.Errorf("state %d, want off", got)
	}
}
