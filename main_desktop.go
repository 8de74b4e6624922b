//go:build desktop || bindings

package main

import (
	"github.com/aether/aether/app"
	"github.com/aether/aether/backend/cli"
)

// desktop is the Wails app: `aether` with no verb opens the window.
var desktop cli.DesktopFunc = app.Run
