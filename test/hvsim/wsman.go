package hvsim

import (
	"bytes"
	"crypto/rand"
	"encoding/xml"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// WS-Management namespaces and the action URIs masterzen/winrm sends (MS-WSMV, MS-PSRP shells).
const (
	nsSOAP      = "http://www.w3.org/2003/05/soap-envelope"
	nsAddress   = "http://schemas.xmlsoap.org/ws/2004/08/addressing"
	nsWSMan     = "http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd"
	nsShell     = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell"
	nsFault     = "http://schemas.microsoft.com/wbem/wsman/1/wsmanfault"
	anonymous   = "http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous"
	cmdResource = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/cmd"

	actionCreate  = "http://schemas.xmlsoap.org/ws/2004/09/transfer/Create"
	actionDelete  = "http://schemas.xmlsoap.org/ws/2004/09/transfer/Delete"
	actionCommand = nsShell + "/Command"
	actionSend    = nsShell + "/Send"
	actionReceive = nsShell + "/Receive"
	actionSignal  = nsShell + "/Signal"
	actionFault   = "http://schemas.dmtf.org/wbem/wsman/1/wsman/fault"

	stateRunning = nsShell + "/CommandState/Running"
	stateDone    = nsShell + "/CommandState/Done"
	signalTerm   = nsShell + "/signal/terminate"
	signalCtrlC  = nsShell + "/signal/ctrl_c"
)

// Action names used in counters, fault injection and logs.
const (
	ActionCreate  = "Create"
	ActionCommand = "Command"
	ActionSend    = "Send"
	ActionReceive = "Receive"
	ActionSignal  = "Signal"
	ActionDelete  = "Delete"
)

var actionNames = map[string]string{
	actionCreate: ActionCreate, actionDelete: ActionDelete, actionCommand: ActionCommand,
	actionSend: ActionSend, actionReceive: ActionReceive, actionSignal: ActionSignal,
}

type wsSelector struct {
	Name  string `xml:"Name,attr"`
	Value string `xml:",chardata"`
}

type wsStream struct {
	Name      string `xml:"Name,attr"`
	CommandID string `xml:"CommandId,attr"`
	End       string `xml:"End,attr"`
	Data      string `xml:",chardata"`
}

// envelope is the part of a WS-Management request the simulator reads.
type envelope struct {
	XMLName xml.Name `xml:"http://www.w3.org/2003/05/soap-envelope Envelope"`
	Header  struct {
		Action           string       `xml:"http://schemas.xmlsoap.org/ws/2004/08/addressing Action"`
		MessageID        string       `xml:"http://schemas.xmlsoap.org/ws/2004/08/addressing MessageID"`
		To               string       `xml:"http://schemas.xmlsoap.org/ws/2004/08/addressing To"`
		ResourceURI      string       `xml:"http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd ResourceURI"`
		OperationTimeout string       `xml:"http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd OperationTimeout"`
		MaxEnvelopeSize  string       `xml:"http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd MaxEnvelopeSize"`
		Selectors        []wsSelector `xml:"http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd SelectorSet>Selector"`
		Options          []wsSelector `xml:"http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd OptionSet>Option"`
	} `xml:"http://www.w3.org/2003/05/soap-envelope Header"`
	Body struct {
		Shell *struct {
			IdleTimeOut   string `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell IdleTimeOut"`
			InputStreams  string `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell InputStreams"`
			OutputStreams string `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell OutputStreams"`
		} `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Shell"`
		CommandLine *struct {
			Command   string   `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Command"`
			Arguments []string `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Arguments"`
		} `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell CommandLine"`
		Send *struct {
			Streams []wsStream `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Stream"`
		} `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Send"`
		Receive *struct {
			DesiredStream struct {
				CommandID string `xml:"CommandId,attr"`
				Streams   string `xml:",chardata"`
			} `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell DesiredStream"`
		} `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Receive"`
		Signal *struct {
			CommandID string `xml:"CommandId,attr"`
			Code      string `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Code"`
		} `xml:"http://schemas.microsoft.com/wbem/wsman/1/windows/shell Signal"`
	} `xml:"http://www.w3.org/2003/05/soap-envelope Body"`
}

func (e *envelope) selector(name string) string {
	for _, s := range e.Header.Selectors {
		if strings.EqualFold(s.Name, name) {
			return strings.TrimSpace(s.Value)
		}
	}
	return ""
}

// parseEnvelope reads a request, or returns the fault WinRM answers a body that is not a SOAP 1.2
// envelope or has no wsa:Action with (env then holds what could be read, for RelatesTo).
func parseEnvelope(body []byte) (*envelope, *wsmanFault) {
	var env envelope
	dec := xml.NewDecoder(bytes.NewReader(body))
	dec.Strict = true
	if err := dec.Decode(&env); err != nil {
		f := faultFor(FaultInvalidXML, "")
		return &env, &f
	}
	if env.Header.Action == "" {
		f := faultFor(FaultHeaderRequired, "")
		return &env, &f
	}
	return &env, nil
}

// isoDuration matches the xs:duration forms WinRM clients send for OperationTimeout (PT60S,
// PT60.000S, PT1M30S).
var isoDuration = regexp.MustCompile(`^PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?$`)

// parseDuration reads an xs:duration of hours, minutes and seconds.
func parseDuration(s string) (time.Duration, bool) {
	m := isoDuration.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil || s == "PT" {
		return 0, false
	}
	var d time.Duration
	if m[1] != "" {
		h, _ := strconv.Atoi(m[1])
		d += time.Duration(h) * time.Hour
	}
	if m[2] != "" {
		mi, _ := strconv.Atoi(m[2])
		d += time.Duration(mi) * time.Minute
	}
	if m[3] != "" {
		sec, _ := strconv.ParseFloat(m[3], 64)
		d += time.Duration(sec * float64(time.Second))
	}
	return d, true
}

// newID returns an upper-case random UUID, as WinRM prints shell and command IDs.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return strings.ToUpper(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]))
}

func xmlText(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// response wraps body in a WS-Management response envelope answering req.
func response(action, relatesTo, body string) []byte {
	return fmt.Appendf(nil, `<s:Envelope xml:lang="en-US" xmlns:s="%s" xmlns:a="%s" xmlns:x="http://schemas.xmlsoap.org/ws/2004/09/transfer" xmlns:w="%s" xmlns:rsp="%s" xmlns:p="http://schemas.microsoft.com/wbem/wsman/1/wsman.xsd">`+
		`<s:Header><a:Action>%s</a:Action><a:MessageID>uuid:%s</a:MessageID><a:To>%s</a:To><a:RelatesTo>%s</a:RelatesTo></s:Header>`+
		`<s:Body>%s</s:Body></s:Envelope>`,
		nsSOAP, nsAddress, nsWSMan, nsShell, xmlText(action), newID(), anonymous, xmlText(relatesTo), body)
}

func createResponse(relatesTo, address, shellID, owner, clientIP string, idle time.Duration) []byte {
	body := fmt.Sprintf(`<x:ResourceCreated><a:Address>%s</a:Address><a:ReferenceParameters><w:ResourceURI>%s</w:ResourceURI>`+
		`<w:SelectorSet><w:Selector Name="ShellId">%s</w:Selector></w:SelectorSet></a:ReferenceParameters></x:ResourceCreated>`+
		`<rsp:Shell><rsp:ShellId>%s</rsp:ShellId><rsp:ResourceUri>%s</rsp:ResourceUri><rsp:Owner>%s</rsp:Owner><rsp:ClientIP>%s</rsp:ClientIP>`+
		`<rsp:IdleTimeOut>PT%.3fS</rsp:IdleTimeOut><rsp:InputStreams>stdin</rsp:InputStreams><rsp:OutputStreams>stdout stderr</rsp:OutputStreams>`+
		`<rsp:ShellRunTime>P0DT0H0M0S</rsp:ShellRunTime><rsp:ShellInactivity>P0DT0H0M0S</rsp:ShellInactivity></rsp:Shell>`,
		xmlText(address), cmdResource, shellID, shellID, cmdResource, xmlText(owner), xmlText(clientIP), idle.Seconds())
	return response(actionCreate+"Response", relatesTo, body)
}

func commandResponse(relatesTo, commandID string) []byte {
	return response(actionCommand+"Response", relatesTo,
		fmt.Sprintf(`<rsp:CommandResponse><rsp:CommandId>%s</rsp:CommandId></rsp:CommandResponse>`, commandID))
}

// receiveResponse carries stdout and stderr chunks and the command's state; exitCode is only
// sent once done.
func receiveResponse(relatesTo, commandID string, stdout, stderr []byte, done bool, exitCode int) []byte {
	var b strings.Builder
	b.WriteString("<rsp:ReceiveResponse>")
	stream := func(name string, data []byte) {
		fmt.Fprintf(&b, `<rsp:Stream Name="%s" CommandId="%s">%s</rsp:Stream>`, name, commandID, b64(data))
	}
	if len(stdout) > 0 {
		stream("stdout", stdout)
	}
	if len(stderr) > 0 {
		stream("stderr", stderr)
	}
	if done {
		fmt.Fprintf(&b, `<rsp:Stream Name="stdout" CommandId="%s" End="true"></rsp:Stream><rsp:Stream Name="stderr" CommandId="%s" End="true"></rsp:Stream>`, commandID, commandID)
		fmt.Fprintf(&b, `<rsp:CommandState CommandId="%s" State="%s"><rsp:ExitCode>%d</rsp:ExitCode></rsp:CommandState>`, commandID, stateDone, exitCode)
	} else {
		fmt.Fprintf(&b, `<rsp:CommandState CommandId="%s" State="%s"></rsp:CommandState>`, commandID, stateRunning)
	}
	b.WriteString("</rsp:ReceiveResponse>")
	return response(actionReceive+"Response", relatesTo, b.String())
}

func signalResponse(relatesTo string) []byte {
	return response(actionSignal+"Response", relatesTo, `<rsp:SignalResponse/>`)
}

func sendResponse(relatesTo string) []byte {
	return response(actionSend+"Response", relatesTo, `<rsp:SendResponse/>`)
}

func deleteResponse(relatesTo string) []byte {
	return response(actionDelete+"Response", relatesTo, "")
}
