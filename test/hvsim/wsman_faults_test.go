package hvsim

import (
	"context"
	"encoding/base64"
	"encoding/xml"
	"net/http"
	"strings"
	"testing"

	"github.com/masterzen/winrm"
	. "github.com/onsi/gomega"
)

// soapFault is the part of a fault response these tests read.
type soapFault struct {
	RelatesTo string `xml:"Header>RelatesTo"`
	Fault     struct {
		Code    string `xml:"Code>Value"`
		Subcode string `xml:"Code>Subcode>Value"`
		Reason  string `xml:"Reason>Text"`
		Detail  struct {
			FaultDetail string `xml:"FaultDetail"`
			WSManFault  struct {
				Code    string `xml:"Code,attr"`
				Machine string `xml:"Machine,attr"`
				Message string `xml:"Message"`
			} `xml:"WSManFault"`
		} `xml:"Detail"`
	} `xml:"Body>Fault"`
}

// request is a WS-Management request as pywinrm and masterzen/winrm build them.
func request(messageID, action, resource, shellID, body string) string {
	selectors := ""
	if shellID != "" {
		selectors = `<w:SelectorSet><w:Selector Name="ShellId">` + shellID + `</w:Selector></w:SelectorSet>`
	}
	return `<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope" xmlns:a="http://schemas.xmlsoap.org/ws/2004/08/addressing" ` +
		`xmlns:w="http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd" xmlns:rsp="http://schemas.microsoft.com/wbem/wsman/1/windows/shell">` +
		`<env:Header><a:To>https://127.0.0.1/wsman</a:To><a:MessageID>` + messageID + `</a:MessageID><a:Action>` + action + `</a:Action>` +
		`<w:ResourceURI>` + resource + `</w:ResourceURI><w:OperationTimeout>PT20S</w:OperationTimeout>` + selectors + `</env:Header>` +
		`<env:Body>` + body + `</env:Body></env:Envelope>`
}

// TestErrorsAreSOAPFaults: every error WinRM reports once it has an envelope to answer is an
// HTTP 500 carrying a SOAP 1.2 fault with its subcode and the WSManFault code, as Windows sends
// them, never a plain-text status.
func TestErrorsAreSOAPFaults(t *testing.T) {
	s := startServer(t, Options{TLS: true, Executor: echoExecutor(nil)})
	shell := createShell(t, s, testUser, testPassword)
	status, body := call(t, s, testUser, testPassword, winrm.NewExecuteCommandRequest(s.URL(), shell, "stdin", nil, nil))
	if status != http.StatusOK {
		t.Fatal(body)
	}
	cmdID, _ := winrm.ParseExecuteCommandResponse(body)
	status, body = call(t, s, testUser, testPassword, winrm.NewSendInputRequest(s.URL(), shell, cmdID, []byte("x"), true, nil))
	if status != http.StatusOK {
		t.Fatal(body)
	}
	const unknownID = "9C3E57A5-6B0E-4F5B-8E37-5B1C1C2F0A11"
	unknownSelectors := "The WS-Management service cannot process the request because the request contained invalid selectors for the resource. "
	stdin := func(id, name, end string) string {
		return `<rsp:Send><rsp:Stream Name="` + name + `" CommandId="` + id + `"` + end + `>eA==</rsp:Stream></rsp:Send>`
	}
	for name, tc := range map[string]struct {
		action, resource, shell, body string
		raw                           string // a body that is not an envelope
		subcode, code, reason, msg    string
		detail                        string
	}{
		// Recorded from Windows: jborean93/pypsrp tests/responses/test_winrs_bad_cmd_id.yml.
		"Receive of an unknown command": {action: actionReceive, resource: cmdResource, shell: shell,
			body:    `<rsp:Receive><rsp:DesiredStream CommandId="` + unknownID + `">stdout stderr</rsp:DesiredStream></rsp:Receive>`,
			subcode: "w:InvalidSelectors", code: "2150858843", reason: unknownSelectors, detail: detailUnexpectedSelectors,
			msg: "The Windows Remote Shell received a request to perform an operation on a command identifier that does not exist. Either the command has completed execution or the client specified an invalid command identifier. "},
		"Receive without a CommandId": {action: actionReceive, resource: cmdResource, shell: shell,
			body:    `<rsp:Receive><rsp:DesiredStream>stdout stderr</rsp:DesiredStream></rsp:Receive>`,
			subcode: "w:InvalidSelectors", code: "2150858843", reason: unknownSelectors, msg: "command identifier that does not exist"},
		"Signal of an unknown command": {action: actionSignal, resource: cmdResource, shell: shell,
			body:    `<rsp:Signal CommandId="` + unknownID + `"><rsp:Code>` + signalTerm + `</rsp:Code></rsp:Signal>`,
			subcode: "w:InvalidSelectors", code: "2150858843", reason: unknownSelectors, msg: "command identifier that does not exist"},
		"Send to an unknown command": {action: actionSend, resource: cmdResource, shell: shell, body: stdin(unknownID, "stdin", ""),
			subcode: "w:InvalidSelectors", code: "2150858843", reason: unknownSelectors, msg: "command identifier that does not exist"},
		// Windows' message as Microsoft's Exchange Online PowerShell documentation quotes it; the
		// rest as in the recording above.
		"Command in an unknown shell": {action: actionCommand, resource: cmdResource, shell: unknownID,
			body:    `<rsp:CommandLine><rsp:Command>echo</rsp:Command></rsp:CommandLine>`,
			subcode: "w:InvalidSelectors", code: "2150858843", reason: unknownSelectors, detail: detailUnexpectedSelectors,
			msg: "The request for the Windows Remote Shell with ShellId " + unknownID + " failed because the shell was not found on the server."},
		"unknown action": {action: "http://schemas.xmlsoap.org/ws/2004/09/transfer/Get", resource: cmdResource, shell: shell,
			subcode: "a:ActionNotSupported", code: "2150858771", msg: "does not support the action"},
		"unknown resource URI": {action: actionCreate, resource: cmdResource + "/nosuch",
			body:    `<rsp:Shell><rsp:InputStreams>stdin</rsp:InputStreams><rsp:OutputStreams>stdout stderr</rsp:OutputStreams></rsp:Shell>`,
			subcode: "a:DestinationUnreachable", code: "2150858770", detail: detailInvalidResourceURI, msg: "was not found in the WS-Management catalog"},
		"empty command line": {action: actionCommand, resource: cmdResource, shell: shell,
			body:    `<rsp:CommandLine><rsp:Command>  </rsp:Command></rsp:CommandLine>`,
			subcode: "w:SchemaValidationError", code: "2150858817", msg: "element rsp:Command that is invalid"},
		"Command without a CommandLine": {action: actionCommand, resource: cmdResource, shell: shell,
			subcode: "w:SchemaValidationError", code: "2150858817", msg: "element rsp:CommandLine that is invalid"},
		"Receive without a DesiredStream": {action: actionReceive, resource: cmdResource, shell: shell,
			subcode: "w:SchemaValidationError", code: "2150858817", msg: "rsp:DesiredStream"},
		"Signal without a Signal": {action: actionSignal, resource: cmdResource, shell: shell,
			subcode: "w:SchemaValidationError", code: "2150858817", msg: "rsp:Signal"},
		"Send without a Stream": {action: actionSend, resource: cmdResource, shell: shell, body: `<rsp:Send/>`,
			subcode: "w:SchemaValidationError", code: "2150858817", msg: "rsp:Stream"},
		"Send to an output stream": {action: actionSend, resource: cmdResource, shell: shell, body: stdin(cmdID, "stdout", ""),
			subcode: "w:InvalidParameter", code: "2150858810", msg: "not an input stream"},
		"Send after the end of stdin": {action: actionSend, resource: cmdResource, shell: shell, body: stdin(cmdID, "stdin", ` End="true"`),
			subcode: "w:InvalidParameter", code: "2150858810", msg: "already ended"},
		"no wsa:Action": {resource: cmdResource,
			subcode: "a:MessageInformationHeaderRequired", code: "2150858769", msg: "does not have all the expected SOAP headers"},
		"not XML": {raw: "<not soap", subcode: "w:SchemaValidationError", code: "2150858819", msg: "the XML is invalid"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			messageID := "uuid:" + newID()
			body := tc.raw
			if body == "" {
				body = request(messageID, tc.action, tc.resource, tc.shell, tc.body)
			}
			basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(testUser+":"+testPassword))
			resp := post(t, s, basic, soapCT, []byte(body))
			g.Expect(resp.StatusCode).To(Equal(http.StatusInternalServerError))
			g.Expect(resp.Header.Get("Content-Type")).To(Equal("application/soap+xml;charset=UTF-8"))
			var f soapFault
			g.Expect(xml.NewDecoder(resp.Body).Decode(&f)).To(Succeed())
			if tc.raw == "" {
				g.Expect(f.RelatesTo).To(Equal(messageID))
			}
			g.Expect(f.Fault.Code).To(Equal("s:Sender"))
			g.Expect(f.Fault.Subcode).To(Equal(tc.subcode))
			g.Expect(f.Fault.Detail.WSManFault.Code).To(Equal(tc.code))
			g.Expect(f.Fault.Detail.WSManFault.Machine).NotTo(BeEmpty())
			g.Expect(f.Fault.Detail.WSManFault.Message).To(ContainSubstring(tc.msg))
			if tc.reason != "" {
				g.Expect(f.Fault.Reason).To(Equal(tc.reason))
			}
			if tc.detail != "" {
				g.Expect(f.Fault.Detail.FaultDetail).To(Equal(tc.detail))
			}
		})
	}
	if st := s.Stats(); st.HTTPErrors != 0 {
		t.Errorf("%d plain-text HTTP errors", st.HTTPErrors)
	}
}

// TestCmdAndPowerShellRefusals: cmd.exe's 9009 for a program it cannot find, PowerShell 5.1's
// whole CommandNotFoundException record, and powershell.exe's own refusal of an -EncodedCommand
// that is not base64 (which is not an unknown program).
func TestCmdAndPowerShellRefusals(t *testing.T) {
	g := NewWithT(t)
	hv := NewHyperV(HyperVConfig{})
	hv.AddHost("hv1", 4, 8192)
	for _, ex := range []Executor{refusingExecutor{}, hv.Executor("hv1")} {
		stdout, stderr, code := ex.Run(context.Background(), "u", `"C:\Program Files\x.exe" /y`, nil)
		g.Expect(stdout).To(BeEmpty())
		g.Expect(string(stderr)).To(Equal("'C:\\Program Files\\x.exe' is not recognized as an internal or external command,\r\noperable program or batch file.\r\n"))
		g.Expect(code).To(Equal(9009))
	}

	_, stderr, code := hv.Executor("hv1").Run(context.Background(), "u", encoded("Get-Date\nStop-Computer -Force"), nil)
	g.Expect(code).To(Equal(1))
	g.Expect(clixmlErrors(string(stderr))).To(Equal([]string{
		"Get-Date : The term 'Get-Date' is not recognized as the name of a cmdlet, function, script file, or operable program. " +
			"Check the spelling of the name, or if a path was included, verify that the path is correct and try again.",
		"At line:1 char:42",
		"+ $ProgressPreference = 'SilentlyContinue';Get-Date",
		"+                                          ~~~~~~~~",
		"    + CategoryInfo          : ObjectNotFound: (Get-Date:String) [], CommandNotFoundException",
		"    + FullyQualifiedErrorId : CommandNotFoundException",
		" ",
	}))

	for _, line := range []string{"powershell.exe -EncodedCommand !!!", "powershell -enc QQBCAA=x"} {
		stdout, stderr, code := hv.Executor("hv1").Run(context.Background(), "u", line, nil)
		g.Expect(stdout).To(BeEmpty())
		g.Expect(string(stderr)).To(Equal("Cannot process the command because the value specified with -EncodedCommand is not properly encoded. The value must be Base64 encoded.\r\n"))
		g.Expect(code).To(Equal(ExitBadCommandLineParameter))
	}
	// An odd number of bytes is not an error to .NET's UTF-16 decoder: the last byte becomes U+FFFD.
	script, ok, err := DecodePowerShell("powershell -e " + base64.StdEncoding.EncodeToString([]byte{'1', 0, '2'}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(script).To(Equal("1\uFFFD"))
}

// clixmlErrors returns the Error strings of a CLIXML error stream.
func clixmlErrors(stream string) []string {
	var out []string
	for _, part := range strings.Split(stream, `<S S="Error">`)[1:] {
		text, _, _ := strings.Cut(part, "</S>")
		text = strings.TrimSuffix(text, "_x000D__x000A_")
		out = append(out, strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(text))
	}
	return out
}
