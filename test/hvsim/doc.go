// Package hvsim is a WS-Management (WinRM) simulator for HyperFleet's Hyper-V provider tests: a
// SOAP 1.2 server at /wsman with Basic and NTLMv2 authentication over loopback HTTPS, shells,
// commands, streams, WinRM's faults, fault and latency injection and counters. The command a
// client runs is handed to a pluggable Executor; HyperV is the executor that answers the Hyper-V
// provider's module calls against hosts, VMs, disks, checkpoints, migration jobs, switches, NAT,
// DHCP scopes, port ACLs, folders and volumes held in memory.
//
// Errors are answered as Windows' WinRM service answers them: once a request is authenticated and
// its body read, every refusal is an HTTP 500 with a SOAP 1.2 fault (its subcode, s:Reason, the
// DSP0226 w:FaultDetail where Windows sends one, and an f:WSManFault with the wsmerror.h code);
// refused credentials are an HTTP 401 without a body. pywinrm, a client HyperFleet did not write,
// checks this in TestPywinrmConformance.
//
// NTLM message encryption (MS-WSMV 2.2.9.1.1, what WinRM requires over HTTP by default and what
// pywinrm's message_encryption sends): after an NTLMv2 authentication that negotiated SEAL (and
// KEY_EXCH, as the client asks), each request is multipart/encrypted, protocol
// application/HTTP-SPNEGO-session-encrypted; the simulator unseals it and verifies its signature
// and sequence number with the client-to-server keys (MS-NLMP 3.4), and seals its answer, faults
// included, with the server-to-client keys. A message that does not verify, or one on a
// connection without such a session, is refused with HTTP 400. The empty POST a client sends to
// set its context up is answered 200 with no body. TestPywinrmMessageEncryption runs pywinrm's
// whole exchange this way over plain HTTP.
//
// What the simulator deliberately does not implement, and how it refuses it:
//   - Kerberos, CredSSP and certificate authentication: HTTP 401 offering only Negotiate (NTLM)
//     and Basic. NTLMv1 is refused and NTLM channel binding is ignored. (The AUTHENTICATE
//     message's MIC is checked when the client says it sent one, as pywinrm's NTLM does;
//     go-ntlmssp sends none.) Kerberos and CredSSP message
//     encryption are therefore not served either. Windows' refusal of unencrypted messages over
//     HTTP (AllowUnencrypted=false) is not simulated: plain SOAP over HTTP is served.
//   - Resources other than the cmd shell (WMI/CIM, PowerShell remoting's PSRP shells, the config
//     resources): the a:DestinationUnreachable fault. Actions other than Create, Command, Send,
//     Receive, Signal and Delete (Get, Put, Enumerate, Connect, Reconnect, Disconnect ...): the
//     a:ActionNotSupported fault.
//   - cmd.exe itself: commands go to the Executor; the default one answers every command line as
//     cmd.exe answers a program it cannot find (exit 9009). PowerShell is not run either: HyperV
//     answers only HyperFleet's scripts, any other as PowerShell 5.1 answers an unknown command;
//     an -EncodedCommand that is not base64 gets powershell.exe's own refusal (exit 0xFFFD0000)
//     without its usage text, and error records are not wrapped at the console's width.
//   - Stdin after the first Receive: the Executor takes stdin whole when the command starts.
//   - Shell-level streams: a Receive without a CommandId answers the unknown-command fault.
//   - What Windows answers was recorded for an unknown ShellId and CommandId; the subcodes and
//     codes of the other faults come from DSP0226, MS-WSMV and wsmerror.h, and the simulator's
//     choice of a fault for an empty command line, a Send to an output stream or after stdin ended
//     (w:SchemaValidationError, w:InvalidParameter) is not recorded from Windows.
//   - The HTTP refusals before an envelope is read stay plain statuses, as HTTP.sys answers them:
//     404 for another path, 405 for another method, 413 above MaxEnvelopeSizekb, 415 for another
//     media type; injected Fault.HTTPStatus answers are plain statuses too.
package hvsim
