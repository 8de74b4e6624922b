// Command aether is the Aether node: a desktop app (built with the desktop
// tags) and a headless CLI over the same node.
package main

import (
	"embed"
	"io/fs"
	"os"

	"github.com/aether/aether/backend/cli"
)

//go:embed all:frontend/dist
var dist embed.FS

func main() {
	ui, err := fs.Sub(dist, "frontend/dist")
	if err != nil {
		panic(err) // the embed pattern guarantees the folder
	}
	os.Exit(cli.Main(os.Args[1:], cli.Env{UI: ui, Desktop: desktop, Stdout: os.Stdout, Stderr: os.Stderr}))
}
