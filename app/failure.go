package app

import (
	"html"
	"net/http"
)

// failurePage is the window's only page when the node could not start; how says how to quit.
func failurePage(cause error, how string) http.Handler {
	page := `<!doctype html><html><head><meta charset="utf-8"><title>Aether</title></head>` +
		`<body style="font:15px system-ui,sans-serif;margin:32px;color:#101828;background:#f5f6f8">` +
		`<h1 style="font-size:20px">Aether could not start</h1>` +
		`<p style="white-space:pre-wrap">` + html.EscapeString(cause.Error()) + `</p>` +
		`<p style="color:#475467">` + html.EscapeString(how) + `, fix the problem and start Aether again.</p></body></html>`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		w.Write([]byte(page))
	})
}
