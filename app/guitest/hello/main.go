//go:build desktop

// Command hello is the B5 baseline: the smallest Wails v2 app (one static page), built
// with the same tags as Aether (desktop,production,webkit2_41).
package main

import (
	"net/http"
	"os"

	"github.com/wailsapp/wails/v2"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
)

const page = `<!doctype html><html><head><meta charset="utf-8"><title>Hello</title></head>` +
	`<body style="font:16px sans-serif;margin:40px"><h1>Hello, Wails</h1></body></html>`

func main() {
	err := wails.Run(&options.App{
		Title:  "Hello",
		Width:  1180,
		Height: 800,
		AssetServer: &assetserver.Options{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte(page))
		})},
	})
	if err != nil {
		os.Exit(1)
	}
}
