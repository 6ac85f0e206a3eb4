package hyperv

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestDecodePS51Shapes: every shape Windows PowerShell 5.1's ConvertTo-Json gives a value that a
// script did not force decodes like the forced one.
func TestDecodePS51Shapes(t *testing.T) {
	created := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	forced := `{"Id":"6F1D3C2A-8E4B-4F0E-9A57-2B1C7D9E4A10","Name":"runner-1","State":2,"IPAddresses":["10.0.0.5"],` +
		`"DvdPaths":[],"CreationTime":"2026-11-24T08:00:00.0000000Z","UptimeSeconds":90}`
	for name, raw := range map[string]string{
		"forced": forced,
		"one-element array unwrapped, empty array null, /Date(ms)/": `{"Id":"6F1D3C2A-8E4B-4F0E-9A57-2B1C7D9E4A10","Name":"runner-1","State":2,` +
			`"IPAddresses":"10.0.0.5","DvdPaths":null,"CreationTime":"\/Date(1795507200000)\/","UptimeSeconds":90}`,
		"enum by name, date with offset, TimeSpan object": `{"Id":"6F1D3C2A-8E4B-4F0E-9A57-2B1C7D9E4A10","Name":"runner-1","State":"Running",` +
			`"IPAddresses":["10.0.0.5"],"CreationTime":"/Date(1795507200000+0100)/","UptimeSeconds":{"Ticks":900000000,"Days":0,"TotalSeconds":90.0}}`,
		"ETS-decorated date, enum number as string": `{"Id":"6F1D3C2A-8E4B-4F0E-9A57-2B1C7D9E4A10","Name":"runner-1","State":"2",` +
			`"IPAddresses":["10.0.0.5"],"CreationTime":{"value":"\/Date(1795507200000)\/","DateTime":"Tuesday, November 24, 2026 8:00:00 AM"},"UptimeSeconds":90}`,
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var w wireVM
			g.Expect(json.Unmarshal([]byte(raw), &w)).To(Succeed())
			g.Expect(w.State).To(Equal(VMStateRunning))
			g.Expect([]string(w.IPAddresses)).To(Equal([]string{"10.0.0.5"}))
			g.Expect(w.DvdPaths).To(BeEmpty())
			g.Expect(w.CreationTime.Time).To(BeTemporally("==", created))
			g.Expect(w.UptimeSeconds).To(Equal(psSeconds(90)))
		})
	}
}

// TestDecodeInventoryWithOneVM: an inventory of one VM whose list was unwrapped to the VM itself.
func TestDecodeInventoryWithOneVM(t *testing.T) {
	g := NewWithT(t)
	var inv wireInventory
	g.Expect(json.Unmarshal([]byte(`{"Host":{"Name":"HV1","LogicalProcessors":8},"VMs":{"Id":"x","Name":"a","State":3}}`), &inv)).To(Succeed())
	g.Expect(inv.VMs).To(HaveLen(1))
	g.Expect(inv.VMs[0].State).To(Equal(VMStateOff))
	g.Expect(json.Unmarshal([]byte(`{"Host":{},"VMs":null}`), &inv)).To(Succeed())
	g.Expect(inv.VMs).To(BeEmpty())
}

func TestDecodeRefusesGarbage(t *testing.T) {
	for _, raw := range []string{`{"State":"Exploded"}`, `{"CreationTime":"yesterday"}`, `{"IPAddresses":{"a":1}}`} {
		var w wireVM
		if err := json.Unmarshal([]byte(raw), &w); err == nil {
			t.Errorf("%s decoded", raw)
		}
	}
}

// TestEnvelopeIsTheLastLine: output written before the answer (a profile, a stray cmdlet) is skipped.
func TestEnvelopeIsTheLastLine(t *testing.T) {
	g := NewWithT(t)
	env, err := decodeEnvelope("WARNING: something\r\n{\"Ok\":false,\"Class\":\"Busy\",\"Message\":\"m\"}\r\n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env).To(Equal(envelope{Class: "Busy", Message: "m"}))
	env, err = decodeEnvelope("{\"Ok\":true,\"Data\":{\"Removed\":[\"C:\\\\a\"],\"x\":\r\n{\"y\":1}}}\r\n")
	g.Expect(err).NotTo(HaveOccurred(), "a line wrapped by the host, even before a brace")
	g.Expect(string(env.Data)).To(Equal(`{"Removed":["C:\\a"],"x":{"y":1}}`))
	_, err = decodeEnvelope("\r\n")
	g.Expect(err).To(HaveOccurred())
}

// TestModuleMissingIsRecognised: Import-Module's failure, as the error stream carries it, is what
// makes the provider deploy the module again.
func TestModuleMissingIsRecognised(t *testing.T) {
	g := NewWithT(t)
	clixml := "#< CLIXML\r\n<Objs Version=\"1.1.0.1\" xmlns=\"http://schemas.microsoft.com/powershell/2004/04\">" +
		"<Obj S=\"progress\" RefId=\"0\"><TN RefId=\"0\"><T>System.Management.Automation.PSCustomObject</T></TN></Obj>" +
		"<S S=\"Error\">Import-Module : The specified module 'x' was not loaded_x000D__x000A_</S>" +
		"<S S=\"Error\">    + FullyQualifiedErrorId : Modules_ModuleNotFound_x000D__x000A_</S></Objs>"
	text := errorText(clixml)
	g.Expect(text).To(HavePrefix("Import-Module : The specified module"))
	g.Expect(isModuleMissing(text)).To(BeTrue())
	g.Expect(errorText("plain\r\n")).To(Equal("plain"))
}
