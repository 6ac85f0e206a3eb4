package hvsim

import (
	"testing"

	"github.com/hyperfleet-io/hyperfleet/test/qemuguest"
)

func TestGuestFirmwareFollowsGenerationAndSecureBoot(t *testing.T) {
	for _, tc := range []struct {
		generation int
		secureBoot string
		want       qemuguest.Firmware
		refused    bool
	}{
		{2, "MicrosoftUEFICertificateAuthority", qemuguest.UEFISecureBoot, false},
		{2, "MicrosoftWindows", 0, true}, // trusts Windows' CA alone: Debian's shim would not boot
		{2, "OpenSourceShieldedVM", 0, true},
		{2, "Off", qemuguest.UEFI, false},
		{1, "", qemuguest.BIOS, false},
	} {
		got, err := guestFirmware(&hvVM{generation: tc.generation, secureBoot: tc.secureBoot})
		if (err != nil) != tc.refused || (!tc.refused && got != tc.want) {
			t.Errorf("generation %d, secure boot %q: firmware %d, %v; want %d (refused %v)", tc.generation, tc.secureBoot, got, err, tc.want, tc.refused)
		}
	}
	if got := colonMAC("00155D0A0B0C"); got != "00:15:5D:0A:0B:0C" {
		t.Errorf("colonMAC = %q", got)
	}
	if got := colonMAC("short"); got != "" {
		t.Errorf("colonMAC of a malformed MAC = %q, want empty", got)
	}
}
