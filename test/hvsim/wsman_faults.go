package hvsim

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"time"
)

// WinRM's fault codes (f:WSManFault/@Code) the simulator answers with.
const (
	// FaultOperationTimeout: a Receive found no output within the request's OperationTimeout; the
	// client polls again.
	FaultOperationTimeout uint32 = 2150858793
	// FaultShellNotFound: the ShellId names no shell of this user.
	FaultShellNotFound uint32 = 2150858843
	// FaultShellQuota: the user already has MaxShellsPerUser shells open.
	FaultShellQuota uint32 = 2150859173
	// FaultTooManyOperations: MaxConcurrentOperationsPerUser was exceeded.
	FaultTooManyOperations uint32 = 2150859174
	// FaultCommandLineTooLong: cmd.exe refused a command line over 8191 characters.
	FaultCommandLineTooLong uint32 = 2147942606
	// FaultSchemaValidation: the message does not match WS-Management's schema (an IdleTimeOut
	// that is not an xs:duration ...): ERROR_WSMAN_SCHEMA_VALIDATION_ERROR.
	FaultSchemaValidation uint32 = 2150858817
	// FaultAccessDenied: the user may not use the shell plugin.
	FaultAccessDenied uint32 = 5
)

// wsmanFault is one SOAP fault as WinRM sends it (HTTP 500, s:Fault with a f:WSManFault detail).
type wsmanFault struct {
	code     uint32
	soapCode string // s:Receiver or s:Sender
	subcode  string // w:TimedOut, w:InvalidSelectors ...
	message  string
	provider bool // message wrapped in a ProviderFault of the shell plugin
}

func faultFor(code uint32, detail string) wsmanFault {
	switch code {
	case FaultOperationTimeout:
		return wsmanFault{code: code, soapCode: "s:Receiver", subcode: "w:TimedOut",
			message: "The WS-Management service cannot complete the operation within the time specified in OperationTimeout.  "}
	case FaultShellNotFound:
		return wsmanFault{code: code, soapCode: "s:Sender", subcode: "w:InvalidSelectors",
			message: fmt.Sprintf("The request for the Windows Remote Shell with ShellId %s failed because the shell was not found on the server. Possible causes are: the specified ShellId is incorrect or the shell no longer exists on the server. Provide the correct ShellId or create a new shell and retry the operation. ", detail)}
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
			message: fmt.Sprintf("The SOAP XML in the message does not match the corresponding XML schema definition. Change the XML and retry. %s", detail)}
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
	detail := fmt.Sprintf(`<s:Fault><s:Code><s:Value>%s</s:Value><s:Subcode><s:Value>%s</s:Value></s:Subcode></s:Code>`+
		`<s:Reason><s:Text xml:lang="en-US">%s</s:Text></s:Reason><s:Detail><f:WSManFault xmlns:f="%s" Code="%d" Machine="%s"><f:Message>%s</f:Message></f:WSManFault></s:Detail></s:Fault>`,
		f.soapCode, f.subcode, xmlText(f.message), nsFault, f.code, xmlText(machine), msg)
	return response(actionFault, relatesTo, detail)
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
