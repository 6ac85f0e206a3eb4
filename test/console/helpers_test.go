package console

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/console"
)

// response is an answer of the console.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// problem decodes a problem document.
func (r response) problem(t *testing.T) console.Problem {
	t.Helper()
	var p console.Problem
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("want a problem document, got %s: %s", ct, r.Body)
	}
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.Body, err)
	}
}

// call sends a request with a bearer token (none when empty) and a JSON body (none when nil).
func (f *fixture) call(t *testing.T, method, path, token string, body any) response {
	t.Helper()
	return f.send(t, http.DefaultClient, method, path, body, func(h http.Header) {
		if token != "" {
			h.Set("Authorization", "Bearer "+token)
		}
	})
}

func (f *fixture) send(t *testing.T, c *http.Client, method, path string, body any, header func(http.Header)) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, f.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if header != nil {
		header(req.Header)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}
