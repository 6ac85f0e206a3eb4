"""Drives the WS-Management simulator with pywinrm, a WinRM client HyperFleet did not write.

Reads a JSON configuration on stdin (url, user, password, ca, transports, script,
unknown_script) and prints one JSON object: per transport, what each exchange gave (output,
exit code, or the exception pywinrm raised and its text). The Go test (pywinrm_test.go) asserts.
"""
import base64
import json
import sys
import uuid

import winrm
from winrm.exceptions import WinRMError, WinRMOperationTimeoutError, WinRMTransportError

CMD_RESOURCE = 'http://schemas.microsoft.com/wbem/wsman/1/windows/shell/cmd'


def text(b):
    return b.decode('utf-8', 'replace') if isinstance(b, bytes) else b


def failure(fn):
    """Runs fn, which must fail, and reports how."""
    try:
        fn()
    except (WinRMOperationTimeoutError, WinRMTransportError, WinRMError) as e:
        return {'exception': type(e).__name__, 'message': str(e)}
    return {'exception': None}


def run(protocol, command, args=()):
    shell = protocol.open_shell()
    try:
        command_id = protocol.run_command(shell, command, args)
        stdout, stderr, code = protocol.get_command_output(shell, command_id)
        protocol.cleanup_command(shell, command_id)
    finally:
        protocol.close_shell(shell)
    return {'stdout': text(stdout), 'stderr': text(stderr), 'code': code}


def encoded(script):
    # What Session.run_ps sends (pywinrm 0.3.0): UTF-16LE, base64, lower-case flag.
    return 'powershell -encodedcommand ' + base64.b64encode(script.encode('utf_16_le')).decode('ascii')


def message(protocol, action, resource, shell_id=None, body=None):
    """Sends one hand-built request through pywinrm's own envelope and error handling."""
    import xmltodict
    req = {'env:Envelope': protocol._get_soap_header(action=action, resource_uri=resource, shell_id=shell_id)}
    req['env:Envelope'].setdefault('env:Body', body or {})
    return protocol.send_message(xmltodict.unparse(req))


def exercise(cfg, transport):
    kwargs = dict(transport=transport, server_cert_validation='validate', ca_trust_path=cfg['ca'],
                  message_encryption=cfg.get('encryption', 'never'), operation_timeout_sec=20, read_timeout_sec=30)
    session = winrm.Session(cfg['url'], auth=(cfg['user'], cfg['password']), **kwargs)
    p = session.protocol
    out = {}

    r = session.run_cmd('echo', ['hello'])
    out['cmd'] = {'stdout': text(r.std_out), 'stderr': text(r.std_err), 'code': r.status_code}

    r = session.run_ps(cfg['script'])
    out['ps'] = {'stdout': text(r.std_out), 'stderr': text(r.std_err), 'code': r.status_code}

    # run_ps of pywinrm 0.3.0 cannot clean a bytes stderr on Python 3: run what it sends and
    # clean the CLIXML with its own parser.
    res = run(p, encoded(cfg['unknown_script']))
    res['clean'] = session._clean_error_msg(res['stderr'])
    out['ps_unknown'] = res

    out['ps_bad_encoding'] = run(p, 'powershell -encodedcommand !!notbase64!!')
    out['unknown'] = run(p, 'no-such-program', ['/x'])
    out['slow'] = run(p, 'ping', ['-n', '2', '127.0.0.1'])

    shell = p.open_shell()
    out['unknown_command_id'] = failure(lambda: p.get_command_output(shell, str(uuid.uuid4()).upper()))
    out['signal_unknown_command_id'] = failure(lambda: p.cleanup_command(shell, str(uuid.uuid4()).upper()))
    out['unknown_action'] = failure(lambda: message(
        p, 'http://schemas.xmlsoap.org/ws/2004/09/transfer/Get', CMD_RESOURCE, shell))
    out['unknown_resource'] = failure(lambda: message(
        p, 'http://schemas.xmlsoap.org/ws/2004/09/transfer/Create', CMD_RESOURCE + '/nosuch',
        body={'rsp:Shell': {'rsp:InputStreams': 'stdin', 'rsp:OutputStreams': 'stdout stderr'}}))
    out['empty_command'] = failure(lambda: p.run_command(shell, ''))
    p.close_shell(shell)
    out['closed_shell'] = failure(lambda: p.run_command(shell, 'echo', ['late']))

    bad = winrm.Session(cfg['url'], auth=(cfg['user'], 'wrong-' + cfg['password']), **kwargs)
    out['bad_password'] = failure(lambda: bad.run_cmd('echo', ['x']))
    return out


def main():
    cfg = json.load(sys.stdin)
    json.dump({t: exercise(cfg, t) for t in cfg['transports']}, sys.stdout)


if __name__ == '__main__':
    main()
