package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aether/aether/backend/pactmcp"
)

const mcpUsage = `Usage: aether mcp --agent NAME [--data-dir D]

An MCP server on stdin/stdout for an assistant (Claude Desktop, Codex, Cursor, VS Code) to start:
its tools pact_describe, pact_ask and pact_receipts call brands on other Aether nodes as one of
your agents. Name the agent first on the My agents page; this node must be running, with an
https publicUrl (docs/assistants.md).

Flags:
`

func mcpVerb(args []string, env Env) int {
	fs := newFlags("mcp", env)
	name := fs.String("agent", "", "the agent this assistant speaks as, as named on the My agents page (e.g. claude-desktop)")
	dir := fs.String("data-dir", "", "the node's data dir")
	agentDir := fs.String("agent-dir", "", "the agent folder shared with `aether agent`: saved delegation tokens, the checkpoints held of each node's log (default $XDG_CONFIG_HOME/aether/agent)")
	wait := fs.Duration("wait", pactmcp.DefaultWait, "how long one pact_ask call waits before it answers \"still waiting\" with a handle: below the assistant's tool timeout")
	fs.Usage = func() {
		fmt.Fprint(env.Stderr, mcpUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *name == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	c, err := nodeAPI(*dir)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether mcp:", err)
		return 1
	}
	s, err := pactmcp.New(pactmcp.Config{Agent: *name, Node: c, Dir: *agentDir, Wait: *wait, Log: env.Stderr})
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether mcp:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	// stdout is the MCP channel: nothing else may be written there.
	if err := s.Run(ctx, &sdk.StdioTransport{}); err != nil && ctx.Err() == nil {
		fmt.Fprintln(env.Stderr, "aether mcp:", err)
		return 1
	}
	return 0
}
