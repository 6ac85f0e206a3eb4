package pvesim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// apiError is an error answered the way PVE's REST handler answers a die or a
// PVE::Exception: the first line of Message in the reason phrase, the full
// message (and per-parameter Errors for 400) in the JSON body.
type apiError struct {
	Code    int
	Message string
	Errors  map[string]string
	// NoBody answers without a JSON body, like pveproxy's own auth failures.
	NoBody bool
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%d %s", e.Code, strings.TrimSuffix(e.Message, "\n"))
}

// errf is a plain `die "...\n"` in a PVE handler: HTTP 500 with the text.
func errf(format string, args ...any) *apiError {
	return &apiError{Code: http.StatusInternalServerError, Message: fmt.Sprintf(format, args...) + "\n"}
}

// paramErr is PVE's raise_param_exc: 400 "Parameter verification failed."
func paramErr(errs map[string]string) *apiError {
	return &apiError{Code: http.StatusBadRequest, Message: "Parameter verification failed.\n", Errors: errs}
}

func permErr(what string) *apiError {
	msg := "Permission check failed"
	if what != "" {
		msg += " (" + what + ")"
	}
	return &apiError{Code: http.StatusForbidden, Message: msg + "\n"}
}

// pval is one request parameter as PVE's JSON schema code sees it: a plain
// scalar, or a reference ("ARRAY", "HASH", "JSON::PP::Boolean") when it came
// from a JSON body.
type pval struct {
	s   string
	ref string
}

type params map[string]pval

// str returns the scalar value, with JSON booleans as PVE's 1/0.
func (p params) str(k string) (string, bool) {
	v, ok := p[k]
	if !ok {
		return "", false
	}
	return v.s, true
}

func (p params) get(k string) string { v, _ := p.str(k); return v }

// flag reads a boolean parameter the way PVE code does (`if $param->{x}`).
func (p params) flag(k string) bool {
	v, ok := p[k]
	return ok && v.s != "" && v.s != "0"
}

// ServeHTTP implements http.Handler.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	switch {
	case strings.HasPrefix(r.URL.Path, "/_sim/"):
		s.serveAdmin(w, r)
		return
	case r.URL.Path == "/api2/json" || strings.HasPrefix(r.URL.Path, "/api2/json/"):
		if l := s.loadState(); l != nil {
			release, ok := l.admit(r.Context().Done())
			if !ok {
				refuse(w)
				return
			}
			defer release()
			if d := l.m.Wall(l.m.RequestTime); d > 0 {
				time.Sleep(d)
			}
		}
		s.serveAPI(w, r)
	default:
		s.writeError(w, r, &apiError{Code: http.StatusNotImplemented, Message: "no such uri\n", NoBody: true})
	}
	s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "took", time.Since(start))
}

func (s *Simulator) serveAPI(w http.ResponseWriter, r *http.Request) {
	rel := strings.TrimPrefix(r.URL.Path, "/api2/json")
	if rel == "" {
		rel = "/"
	}
	rt, uri := s.match(r.Method, rel)
	key := r.Method + " " + rel
	if rt != nil {
		key = r.Method + " " + rt.ep.Path
	}
	s.countRequest(key)

	if apiErr, handled := s.applyFaults(w, r, key); handled {
		if apiErr != nil {
			s.writeError(w, r, apiErr)
		}
		return
	}

	auth, aerr := s.authenticate(r, rel)
	if aerr != nil {
		if d := s.cfg.AuthFailureDelay; d > 0 {
			time.Sleep(d)
		}
		s.writeError(w, r, aerr)
		return
	}
	if rt == nil {
		s.writeError(w, r, &apiError{Code: http.StatusNotImplemented,
			Message: fmt.Sprintf("Method '%s %s' not implemented\n", r.Method, rel)})
		return
	}
	data, err := s.dispatch(r, rt, uri, auth)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.responseLost(key) {
		refuse(w) // closes the connection unanswered
		return
	}
	s.writeData(w, data)
}

// dispatch runs what PVE's rest_handler runs for a found handler: parameter
// merge, token and permission checks, node proxy, schema validation, handler.
func (s *Simulator) dispatch(r *http.Request, rt *route, uri map[string]string, auth *authInfo) (any, *apiError) {
	p, upload, err := extractParams(r)
	if err != nil {
		return nil, err
	}
	for k, v := range uri {
		if pv, ok := p[k]; ok && pv.s != v {
			return nil, paramErr(map[string]string{k: "duplicate parameter (already defined in URI) with conflicting values!"})
		}
		p[k] = pval{s: v}
	}
	if auth.token != "" && rt.ep.AllowToken == 0 {
		return nil, permErr("URI '" + strings.TrimPrefix(r.URL.Path, "/api2/json") + "' not available with API token, need proper ticket.")
	}
	if err := s.checkPermissions(rt.ep.Permissions, auth, p); err != nil {
		return nil, err
	}
	if node, ok := uri["node"]; ok {
		if err := s.proxyCheck(node); err != nil {
			return nil, err
		}
	}
	if errs := validateParams(rt.ep.Parameters, p); len(errs) > 0 {
		return nil, paramErr(errs)
	}
	return rt.handler(&request{sim: s, r: r, p: p, auth: auth, upload: upload, ep: rt.ep})
}

// extractParams merges the body (form, JSON or multipart) and the query like
// PVE's extract_params: query parameters win.
func extractParams(r *http.Request) (params, *uploadFile, *apiError) {
	p := params{}
	var up *uploadFile
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		ct, mp, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		switch ct {
		case "application/json":
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				return nil, nil, errf("%v", err)
			}
			if len(bytes.TrimSpace(body)) > 0 {
				dec := json.NewDecoder(bytes.NewReader(body))
				dec.UseNumber()
				var m map[string]any
				if err := dec.Decode(&m); err != nil {
					return nil, nil, errf("malformed JSON string, %v", err)
				}
				for k, v := range m {
					if v == nil {
						continue // undef in Perl: as if absent
					}
					p[k] = jsonParam(v)
				}
			}
		case "multipart/form-data":
			var err error
			up, err = readMultipart(r, mp["boundary"], p)
			if err != nil {
				return nil, nil, &apiError{Code: http.StatusNotImplemented, Message: err.Error() + "\n"}
			}
		default:
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				return nil, nil, errf("%v", err)
			}
			q, _ := url.ParseQuery(string(body))
			for k, vs := range q {
				p[k] = pval{s: vs[len(vs)-1]}
			}
		}
	}
	q, _ := url.ParseQuery(r.URL.RawQuery)
	for k, vs := range q {
		if len(vs) > 1 {
			p[k] = pval{s: strings.Join(vs, "\x00"), ref: "ARRAY"}
			continue
		}
		p[k] = pval{s: vs[0]}
	}
	delete(p, "_dc")
	return p, up, nil
}

func jsonParam(v any) pval {
	switch t := v.(type) {
	case string:
		return pval{s: t}
	case json.Number:
		return pval{s: t.String()}
	case bool:
		if t {
			return pval{s: "1", ref: "JSON::PP::Boolean"}
		}
		return pval{s: "0", ref: "JSON::PP::Boolean"}
	case []any:
		// Items are kept, NUL-joined like a repeated query parameter, for handlers that read
		// them (agent/exec's command).
		items := make([]string, 0, len(t))
		for _, it := range t {
			items = append(items, fmt.Sprint(it))
		}
		return pval{s: strings.Join(items, "\x00"), ref: "ARRAY"}
	default:
		return pval{ref: "HASH"}
	}
}

func (s *Simulator) writeData(w http.ResponseWriter, data any) {
	body, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		s.log.Error("encode response", "err", err)
		body = []byte(`{"data":null}`)
	}
	h := w.Header()
	now := time.Now().UTC().Format(http.TimeFormat)
	h.Set("Content-Type", "application/json;charset=UTF-8")
	h.Set("Cache-Control", "max-age=0")
	h.Set("Pragma", "no-cache")
	h.Set("Expires", now)
	h.Set("Server", "pve-api-daemon/3.0")
	h.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// writeError answers with PVE's status line, whose reason phrase is the first
// line of the error message. net/http cannot write a custom reason phrase, so
// the connection is hijacked and the response written by hand; pveproxy
// closes the connection after every error anyway.
func (s *Simulator) writeError(w http.ResponseWriter, r *http.Request, e *apiError) {
	reason, _, _ := strings.Cut(e.Message, "\n")
	if reason == "" {
		reason = http.StatusText(e.Code)
	}
	var body []byte
	ctype := ""
	if !e.NoBody {
		m := map[string]any{"data": nil, "message": e.Message}
		if len(e.Errors) > 0 {
			m["errors"] = e.Errors
		}
		body, _ = json.Marshal(m)
		ctype = "application/json;charset=UTF-8"
	}
	writeRaw(w, r, e.Code, reason, ctype, body)
}

func writeRaw(w http.ResponseWriter, r *http.Request, code int, reason, ctype string, body []byte) {
	// Drain what the client sent so closing the socket does not reset it
	// before the client read the answer.
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
	hj, ok := w.(http.Hijacker)
	if !ok {
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(code)
		_, _ = w.Write(body)
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer func() { _ = conn.Close() }()
	now := time.Now().UTC().Format(http.TimeFormat)
	hdr := map[string]string{
		"Cache-Control": "max-age=0",
		"Connection":    "close",
		"Date":          now,
		"Expires":       now,
		"Pragma":        "no-cache",
		"Server":        "pve-api-daemon/3.0",
	}
	if len(body) > 0 {
		hdr["Content-Length"] = fmt.Sprint(len(body))
	}
	if ctype != "" {
		hdr["Content-Type"] = ctype
	}
	keys := make([]string, 0, len(hdr))
	for k := range hdr {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", code, reason)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\r\n", k, hdr[k])
	}
	b.WriteString("\r\n")
	b.Write(body)
	_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = rw.Write(b.Bytes())
	_ = rw.Flush()
}

// refuse closes the request's connection without an answer, as a client of a saturated
// pveproxy sees it.
func refuse(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	w.WriteHeader(http.StatusServiceUnavailable)
}
