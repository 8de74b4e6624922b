// Package cli is the aether command line: `node serve`, `policy check`,
// `receipts verify|export`, `status`, `grants`, `admin`, `agent`. Each verb is a thin
// shell over the node and the services.
package cli

import (
	"flag"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/aether/aether/backend/version"
)

// DesktopFunc starts the desktop app (nil in a headless build).
type DesktopFunc func(args []string, ui fs.FS) int

// Env is what main gives the CLI.
type Env struct {
	UI      fs.FS
	Desktop DesktopFunc
	Stdout  io.Writer
	Stderr  io.Writer
}

const usage = `aether — share capabilities with other people's AI agents, with your consent and a signed receipt for every answer.

Usage:
  aether                      start the desktop app (desktop builds)
  aether node serve [flags]   run the node headless (gateway, admin UI, node API)
  aether policy check --policy policy.json
  aether receipts verify [--data-dir D | --in receipts.jsonl --jwks jwks.json]
  aether receipts export [--data-dir D] [--out receipts.jsonl]
  aether keys rotate [--data-dir D]   (with the node stopped)
  aether status [--data-dir D]
  aether grants list|revoke ID [--data-dir D]
  aether funnel on|off|use [--data-dir D]   publish with Tailscale Funnel; use: make its address the publicUrl
  aether admin new-token [--data-dir D]   a new admin token; ends every admin session
  aether admin link [--data-dir D]        a one-time sign-in link to the admin UI
  aether agent --card URL ... a reference personal agent that walks the whole flow
  aether mcp --agent NAME     an MCP server for your assistant: other nodes' brands as tools
  aether codex pin            the pinned Codex: version, package, tarball URL, sha512, size
  aether codex get [--dir D]  gets the pinned Codex as the Status page does; prints its path
  aether version | --version

Run "aether <verb> -h" for a verb's flags.
`

// Main runs the command and returns the exit code.
func Main(args []string, env Env) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-psn_") {
		if env.Desktop == nil {
			fmt.Fprint(env.Stderr, "This is a headless build of aether: it has no window.\n"+
				"Serve the node with:\n  aether node serve --policy policy.json --data-dir ./.aether/node --port 0 --admin-port 3000 --pact-listen 127.0.0.1:8080\n"+
				"or build the desktop app with: go build -tags desktop,production,webkit2_41 .\n")
			return 2
		}
		return env.Desktop(args, env.UI)
	}
	verb, rest := args[0], args[1:]
	switch verb {
	case "node":
		if len(rest) > 0 && rest[0] == "serve" {
			return serve(rest[1:], env)
		}
		fmt.Fprintln(env.Stderr, "usage: aether node serve [flags]")
		return 2
	case "policy":
		if len(rest) > 0 && rest[0] == "check" {
			return policyCheck(rest[1:], env)
		}
		fmt.Fprintln(env.Stderr, "usage: aether policy check --policy policy.json")
		return 2
	case "receipts":
		if len(rest) > 0 {
			switch rest[0] {
			case "verify":
				return receiptsVerify(rest[1:], env)
			case "export":
				return receiptsExport(rest[1:], env)
			}
		}
		fmt.Fprintln(env.Stderr, "usage: aether receipts verify|export [flags]")
		return 2
	case "keys":
		if len(rest) > 0 && rest[0] == "rotate" {
			return keysRotate(rest[1:], env)
		}
		fmt.Fprintln(env.Stderr, "usage: aether keys rotate [--data-dir D]")
		return 2
	case "status":
		return status(rest, env)
	case "grants":
		return grants(rest, env)
	case "funnel":
		return funnelVerb(rest, env)
	case "admin":
		return adminVerb(rest, env)
	case "agent":
		return agent(rest, env)
	case "mcp":
		return mcpVerb(rest, env)
	case "codex":
		return codexVerb(rest, env)
	case "version", "--version":
		fmt.Fprintln(env.Stdout, "aether", version.String())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(env.Stdout, usage)
		return 0
	}
	if env.Desktop != nil && (strings.HasPrefix(verb, "https://") || strings.HasPrefix(verb, "aether:")) {
		// A consent link handed to the app (second launch, the aether: URL handler).
		return env.Desktop(args, env.UI)
	}
	fmt.Fprintf(env.Stderr, "aether: unknown verb %q\n\n%s", verb, usage)
	return 2
}

// newFlags makes a verb's flag set that reports errors on stderr.
func newFlags(name string, env Env) *flag.FlagSet {
	fs := flag.NewFlagSet("aether "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	return fs
}
