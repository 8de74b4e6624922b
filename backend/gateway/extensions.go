package gateway

import (
	"net/http"
	"strings"
)

// extensionsHeader is A2A 1.0's service parameter for extensions (§3.2.6),
// an HTTP header on both bindings.
const extensionsHeader = "A2A-Extensions"

// activateExtensions is the node's side of extension activation
// (docs/pact-extension.md): a client names the extensions it wants in
// A2A-Extensions, comma-separated, in one header field or several; the answer
// names the ones activated for the request. PACT is the node's only extension,
// so the answer carries its URI when the request asked for it and no
// A2A-Extensions otherwise. Other URIs, other versions of PACT among them, are
// ignored (A2A 1.0 §4.6.3: no fallback to another version). PACT applies to
// every call whether activated or not, so activation changes no answer but
// this header.
func activateExtensions(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Add("Vary", extensionsHeader)
	if requestsExtension(r.Header, ExtensionURI) {
		h.Set(extensionsHeader, ExtensionURI)
	}
}

func requestsExtension(h http.Header, uri string) bool {
	for _, v := range h.Values(extensionsHeader) {
		for _, u := range strings.Split(v, ",") {
			if strings.TrimSpace(u) == uri {
				return true
			}
		}
	}
	return false
}
