//go:build !desktop && !bindings

package main

import "github.com/aether/aether/backend/cli"

// desktop is nil in a headless build: `aether` with no verb explains how to serve.
var desktop cli.DesktopFunc
