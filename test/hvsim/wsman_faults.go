package hvsim

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"net/http"
	"time"
)

// WinRM's fault codes (f:WSManFault/@Code) the simulator answers with. The numbers are the
// HRESULTs of wsmerror.h (Windows SDK; transcribed in Vanara's WsmSvc.Errors.cs), which also
// names each one's SOAP subcode.
const (
	// FaultOperationTimeout: a Receive found no output within the request's OperationTimeout; the
	// client polls again (ERROR_WSMAN_OPERATION_TIMEDOUT).
	FaultOperationTimeout uint32 = 2150858793
	// FaultShellNotFound: the ShellId names no shell of this user, or the CommandId no command
	// of the shell (ERROR_WSMAN_UNEXPECTED_SELECTORS, w:InvalidSelectors for both: see
	// commandNotFound).
	FaultShellNotFound uint32 = 2150858843
	// FaultShellQuota: the user already has MaxShellsPerUser shells open.
	FaultShellQuota uint32 = 2150859173
	// FaultTooManyOperations: MaxConcurrentOperationsPerUser was exceeded.
	FaultTooManyOperations uint32 = 2150859174
	// FaultCommandLineTooLong: cmd.exe refused a command line over 8191 characters.
	FaultCommandLineTooLong uint32 = 2147942606
	// FaultSchemaValidation: the message does not match WS-Management's schema (an IdleTimeOut
	// that is not an xs:duration, a Receive without DesiredStream ...):
	// ERROR_WSMAN_SCHEMA_VALIDATION_ERROR.
	FaultSchemaValidation uint32 = 2150858817
	// FaultInvalidXML: the body is not a well-formed SOAP envelope (ERROR_WSMAN_INVALID_XML).
	FaultInvalidXML uint32 = 2150858819
	// FaultHeaderRequired: the envelope lacks wsa:Action
	// (ERROR_WSMAN_MESSAGE_INFORMATION_HEADER_REQUIRED, a:MessageInformationHeaderRequired).
	FaultHeaderRequired uint32 = 2150858769
	// FaultDestinationUnreachable: the ResourceURI names no resource of the service
	// (ERROR_WSMAN_DESTINATION_UNREACHABLE, a:DestinationUnreachable).
	FaultDestinationUnreachable uint32 = 2150858770
	// FaultActionNotSupported: the wsa:Action is none of the shell's operations
	// (ERROR_WSMAN_ACTION_NOT_SUPPORTED, a:ActionNotSupported).
	FaultActionNotSupported uint32 = 2150858771
	// FaultInvalidParameter: a parameter of the operation is not valid, such as stdin sent after
	// its end (ERROR_WSMAN_INVALID_PARAMETER).
	FaultInvalidParameter uint32 = 2150858810
	// FaultAccessDenied: the user may not use the shell plugin.
	FaultAccessDenied uint32 = 5
)

// DSP0226 (WS-Management 1.x) fault detail URIs carried in w:FaultDetail.
const (
	detailUnexpectedSelectors = "http://schemas.dmtf.org/wbem/wsman/1/wsman/faultDetail/UnexpectedSelectors"
	detailInvalidResourceURI  = "http://schemas.dmtf.org/wbem/wsman/1/wsman/faultDetail/InvalidResourceURI"
)

// wsmanFault is one SOAP fault as WinRM sends it (HTTP 500, s:Fault with a f:WSManFault detail).
type wsmanFault struct {
	code     uint32
	soapCode string // s:Receiver or s:Sender
	subcode  string // w:TimedOut, w:InvalidSelectors ...
	// reason is s:Reason's text; "" repeats message. WinRM puts the subcode's generic text there
	// and the specific one in f:Message when they differ (see commandNotFound).
	reason  string
	message string
	// detail is the DSP0226 w:FaultDetail URI, if any.
	detail   string
	provider bool // message wrapped in a ProviderFault of the shell plugin
}

// unexpectedSelectorsReason is s:Reason of every w:InvalidSelectors fault WinRM sends.
const unexpectedSelectorsReason = "The WS-Management service cannot process the request because the request contained invalid selectors for the resource. "

// schemaReason is ERROR_WSMAN_SCHEMA_VALIDATION_ERROR's text.
const schemaReason = "The SOAP XML in the message does not match the corresponding XML schema definition. Change the XML and retry. "

// shellNotFound is WinRM's answer to a ShellId it does not know for this user. The message is
// Windows' own (quoted verbatim in Microsoft's Exchange Online PowerShell documentation, where a
// changed client address loses the shell); the code, subcode, s:Reason and w:FaultDetail are
// those Windows sends for the same error code (jborean93/pypsrp
// tests/responses/test_winrs_bad_cmd_id.yml).
func shellNotFound(shellID string) wsmanFault {
	return wsmanFault{code: FaultShellNotFound, soapCode: "s:Sender", subcode: "w:InvalidSelectors",
		reason: unexpectedSelectorsReason, detail: detailUnexpectedSelectors,
		message: fmt.Sprintf("The request for the Windows Remote Shell with ShellId %s failed because the shell was not found on the server. Possible causes are: the specified ShellId is incorrect or the shell no longer exists on the server. Provide the correct ShellId or create a new shell and retry the operation. ", shellID)}
}

// commandNotFound is WinRM's answer to a Send, Receive or Signal naming a CommandId the shell does
// not hold: the same code and subcode as an unknown shell, another message. Recorded from Windows
// in jborean93/pypsrp tests/responses/test_winrs_bad_cmd_id.yml (a Receive, HTTP 500).
func commandNotFound() wsmanFault {
	return wsmanFault{code: FaultShellNotFound, soapCode: "s:Sender", subcode: "w:InvalidSelectors",
		reason: unexpectedSelectorsReason, detail: detailUnexpectedSelectors,
		message: "The Windows Remote Shell received a request to perform an operation on a command identifier that does not exist. Either the command has completed execution or the client specified an invalid command identifier. "}
}

// actionNotSupported answers a wsa:Action the service has no operation for (DSP0226 R5.4-7:
// wsa:ActionNotSupported; wsmerror.h: ERROR_WSMAN_ACTION_NOT_SUPPORTED and its text).
func actionNotSupported(action string) wsmanFault {
	return wsmanFault{code: FaultActionNotSupported, soapCode: "s:Sender", subcode: "a:ActionNotSupported",
		reason:  "The action is not supported by the service. ",
		message: fmt.Sprintf("The WS-Management service does not support the action specified in the request: %s. ", action)}
}

// destinationUnreachable answers a ResourceURI the service has no resource for (DSP0226: a
// missing resource is wsa:DestinationUnreachable with the InvalidResourceURI detail). The message
// is the one PowerShell shows for an unknown resource URI (about_Remote_Troubleshooting, and the
// Unregister-PSSessionConfiguration example of PowerShell's documentation).
func destinationUnreachable(resourceURI string) wsmanFault {
	return wsmanFault{code: FaultDestinationUnreachable, soapCode: "s:Sender", subcode: "a:DestinationUnreachable",
		detail:  detailInvalidResourceURI,
		message: fmt.Sprintf("The WS-Management service cannot process the request. The resource URI (%s) was not found in the WS-Management catalog. The catalog contains the metadata that describes resources, or logical endpoints. ", resourceURI)}
}

// schemaInvalid answers a message whose body lacks an element its operation requires, with the
// text MS-WSMV 3.1.4.1.31.3 gives for wsman:SchemaValidationError.
func schemaInvalid(element string) wsmanFault {
	return faultFor(FaultSchemaValidation, fmt.Sprintf("The Windows Remote Shell cannot process the request. The SOAP packet contains an element %s that is invalid. Retry the request with the correct XML element. ", element))
}

func faultFor(code uint32, detail string) wsmanFault {
	switch code {
	case FaultOperationTimeout:
		return wsmanFault{code: code, soapCode: "s:Receiver", subcode: "w:TimedOut",
			message: "The WS-Management service cannot complete the operation within the time specified in OperationTimeout.  "}
	case FaultShellNotFound:
		return shellNotFound(detail)
	case FaultShellQuota:
		return wsmanFault{code: code, soapCode: "s:Receiver", subcode: "w:InternalError",
			message: fmt.Sprintf("The WS-Management service cannot process the request. This user is allowed a maximum number of %s concurrent shells, which has been exceeded. Close existing shells or raise the quota for this user. ", detail)}
	case FaultTooManyOperations:
		return wsmanFault{code: code, soapCode: "s:Receiver", subcode: "w:InternalError",
			message: "The WS-Management service cannot process the request. This user is allowed a maximum number of 1500 concurrent operations, which has been exceeded. Close existing operations for this user, or raise the quota for this user. "}
	case FaultCommandLineTooLong:
		return wsmanFault{code: code, soapCode: "s:Receiver", subcode: "w:InternalError",
			message: "The filename or extension is too long. ", provider: true}
	case FaultSchemaValidation:
		return wsmanFault{code: code, soapCode: "s:Sender", subcode: "w:SchemaValidationError",
			reason: schemaReason, message: cmp.Or(detail, schemaReason)}
	case FaultInvalidXML:
		return wsmanFault{code: code, soapCode: "s:Sender", subcode: "w:SchemaValidationError",
			message: "The WS-Management service cannot process the request because the XML is invalid. "}
	case FaultHeaderRequired:
		return wsmanFault{code: code, soapCode: "s:Sender", subcode: "a:MessageInformationHeaderRequired",
			message: "The WS-Management service cannot process the request. The request does not have all the expected SOAP headers. "}
	case FaultDestinationUnreachable:
		return destinationUnreachable(detail)
	case FaultActionNotSupported:
		return actionNotSupported(detail)
	case FaultInvalidParameter:
		return wsmanFault{code: code, soapCode: "s:Sender", subcode: "w:InvalidParameter",
			message: "The WS-Management service cannot process the request because a parameter for the operation is not valid. " + detail}
	case FaultAccessDenied:
		return wsmanFault{code: code, soapCode: "s:Sender", subcode: "w:AccessDenied", message: "Access is denied. "}
	}
	return wsmanFault{code: code, soapCode: "s:Receiver", subcode: "w:InternalError",
		message: fmt.Sprintf("The WS-Management service cannot process the request (injected fault %d). ", code)}
}

func (f wsmanFault) body(relatesTo, machine string) []byte {
	msg := xmlText(f.message)
	if f.provider {
		msg = `<f:ProviderFault provider="Shell cmd plugin" path="%systemroot%\system32\winrscmd.dll">` + msg + `</f:ProviderFault>`
	}
	reason := f.reason
	if reason == "" {
		reason = f.message
	}
	detail := ""
	if f.detail != "" {
		detail = "<w:FaultDetail>" + f.detail + "</w:FaultDetail>"
	}
	fault := fmt.Sprintf(`<s:Fault><s:Code><s:Value>%s</s:Value><s:Subcode><s:Value>%s</s:Value></s:Subcode></s:Code>`+
		`<s:Reason><s:Text xml:lang="en-US">%s</s:Text></s:Reason><s:Detail>%s<f:WSManFault xmlns:f="%s" Code="%d" Machine="%s"><f:Message>%s</f:Message></f:WSManFault></s:Detail></s:Fault>`,
		f.soapCode, f.subcode, xmlText(reason), detail, nsFault, f.code, xmlText(machine), msg)
	return response(actionFault, relatesTo, fault)
}

// Fault is a failure to inject: WinRM's answer to the matching requests, or a delay before the
// normal answer (latency, or a hung host when longer than the client's timeout).
type Fault struct {
	// Action limits the fault to one operation (ActionCreate, ActionReceive ...); "" matches all.
	Action string
	// Code answers with this WS-Management fault (FaultShellQuota ...) instead of the result.
	Code uint32
	// HTTPStatus, when Code is 0, answers with this status and no SOAP body (503, 502 ...).
	HTTPStatus int
	// Delay holds the answer back this long first (the request's context ends it early).
	Delay time.Duration
	// Times is how many matching requests the fault applies to; 0 means until ClearFaults.
	Times int
}

// Inject adds a fault rule; rules are tried in order and the first matching one applies.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rule := f
	s.faults = append(s.faults, &rule)
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// takeFault returns the injected fault for action, consuming one of its Times.
func (s *Server) takeFault(action string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.Action != "" && f.Action != action {
			continue
		}
		out := *f
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		return &out
	}
	return nil
}

// Stats are the server's counters, for assertions and reports.
type Stats struct {
	// Calls counts authenticated WS-Management requests by action name (ActionCreate ...).
	Calls map[string]int
	// Faults counts SOAP faults sent, by WSManFault code.
	Faults map[uint32]int
	// Unauthorized counts requests whose credentials were refused (not requests without any, nor
	// the NTLM challenge round).
	Unauthorized int
	// HTTPErrors counts other non-SOAP error answers (bad method, content type, injected status).
	HTTPErrors int
	// OpenShells is the number of shells open now.
	OpenShells int
	// BytesIn and BytesOut count request and response bodies.
	BytesIn, BytesOut int64
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Calls = make(map[string]int, len(s.stats.Calls))
	for k, v := range s.stats.Calls {
		st.Calls[k] = v
	}
	st.Faults = make(map[uint32]int, len(s.stats.Faults))
	for k, v := range s.stats.Faults {
		st.Faults[k] = v
	}
	st.OpenShells = len(s.shells)
	return st
}

func (s *Server) writeFault(w http.ResponseWriter, env *envelope, f wsmanFault) {
	s.mu.Lock()
	s.stats.Faults[f.code]++
	s.mu.Unlock()
	s.writeSOAP(w, http.StatusInternalServerError, f.body(env.Header.MessageID, s.machine))
}

func (s *Server) writeSOAP(w http.ResponseWriter, status int, body []byte) {
	s.mu.Lock()
	s.stats.BytesOut += int64(len(body))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/soap+xml;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
