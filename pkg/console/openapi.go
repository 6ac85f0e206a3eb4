package console

import (
	_ "embed"
	"net/http"
)

// openAPIDocument describes /api/v1; a test checks it against the registered routes.
//
//go:embed openapi.json
var openAPIDocument []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDocument)
}
