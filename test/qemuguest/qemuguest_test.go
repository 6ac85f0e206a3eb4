package qemuguest

import "testing"

func TestParseForward(t *testing.T) {
	good, err := ParseForward("8443=127.0.0.1:18443")
	if err != nil || good != (Forward{Port: 8443, Target: "127.0.0.1:18443"}) {
		t.Fatalf("ParseForward: %+v, %v", good, err)
	}
	for _, bad := range []string{"", "8443", "8443=", "=127.0.0.1:1", "0=127.0.0.1:1", "65536=127.0.0.1:1", "x=127.0.0.1:1"} {
		if f, err := ParseForward(bad); err == nil {
			t.Errorf("ParseForward(%q) = %+v, want an error", bad, f)
		}
	}
}

func TestFirmwareFiles(t *testing.T) {
	if code, vars := ovmf(BIOS); code != "" || vars != "" {
		t.Errorf("BIOS needs no OVMF, got %q %q", code, vars)
	}
	if code, vars := ovmf(UEFISecureBoot); code != OVMFSecureCode || vars != OVMFSecureVars {
		t.Errorf("Secure Boot boots %q with %q", code, vars)
	}
	if code, vars := ovmf(UEFI); code != OVMFCode || vars != OVMFVars {
		t.Errorf("UEFI boots %q with %q", code, vars)
	}
	if err := CheckFirmware(BIOS); err != nil {
		t.Errorf("CheckFirmware(BIOS): %v", err)
	}
}
