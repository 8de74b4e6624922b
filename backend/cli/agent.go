package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"

	agentpkg "github.com/aether/aether/backend/agent"
)

const agentUsage = `Usage: aether agent --card URL [flags] "message text"

A reference personal agent: reads the brand's agent card, calls the node with
an identity JWT, runs the device flow when the node asks for the owner's
consent, sends the turn again with the delegation token, and verifies the
receipt with the node JWKS. The token is saved, so the next run needs no consent.

Without --identity-token the agent runs its own issuer on loopback (the node's
policy must set allowInsecureLocalIssuers, which a public node never does); its key and address are kept in
--issuer-dir, so it stays the same identity across runs.

Flags:
`

func agent(args []string, env Env) int {
	fs := newFlags("agent", env)
	card := fs.String("card", "", "the brand's agent card URL, or the node's publicUrl (with --brand)")
	brand := fs.String("brand", "", "the brand id (needed when --card is a publicUrl serving several brands)")
	subject := fs.String("subject", "", `the agent's subject (sub) at the local issuer (default "`+agentpkg.DefaultSubject+`")`)
	dir := fs.String("issuer-dir", "", "the agent's folder: issuer key and address, saved delegation tokens (default $XDG_CONFIG_HOME/aether/agent)")
	issuerAddr := fs.String("issuer-addr", "", "the local issuer's loopback address, kept for later runs (default: the one used last time, else a free port); a new address is a new agent identity")
	idToken := fs.String("identity-token", "", "an identity JWT from a real issuer, sent instead of running the local one (default $PACT_IDENTITY_TOKEN)")
	audience := fs.String("audience", "", "aud of the local issuer's tokens (default: the node's publicUrl)")
	stream := fs.Bool("stream", false, "stream the turn and print status updates as they arrive")
	binding := fs.String("binding", "jsonrpc", "the card interface to use: jsonrpc or rest (HTTP+JSON)")
	task := fs.String("task", "", "send the turn on this existing task")
	timeout := fs.Duration("timeout", 0, "give up after this long, e.g. 15m (default: no limit; Ctrl-C stops)")
	witness := fs.Bool("witness", false, "cosign the node's log checkpoint this run verified (with the agent's witness key, witness-key.pem) and send the cosignature with the next run")
	peer := fs.String("peer-checkpoint", "", "a file holding a signed checkpoint of the node's receipts log that another agent holds (from its logs.json: logs[].checkpoint), compared with this agent's before the turn")
	fs.Usage = func() {
		fmt.Fprint(env.Stderr, agentUsage)
		fs.PrintDefaults()
	}
	// Flags may come after the message words too.
	var words []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if rest = fs.Args(); len(rest) == 0 {
			break
		}
		words, rest = append(words, rest[0]), rest[1:]
	}
	message := strings.TrimSpace(strings.Join(words, " "))
	if *card == "" || message == "" {
		fmt.Fprintln(env.Stderr, `aether agent: give --card URL and the message text, e.g. aether agent --card https://node.example/a2a/review/.well-known/agent-card.json "Review main.go"`)
		return 2
	}
	b, err := agentpkg.ParseBinding(*binding)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether agent:", err)
		return 2
	}
	if *idToken == "" {
		*idToken = strings.TrimSpace(os.Getenv("PACT_IDENTITY_TOKEN"))
	}

	var peerCheckpoint []byte
	if *peer != "" {
		if peerCheckpoint, err = os.ReadFile(*peer); err != nil {
			fmt.Fprintln(env.Stderr, "aether agent:", err)
			return 2
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	_, err = agentpkg.Run(ctx, agentpkg.Options{
		Card: *card, Brand: *brand, Message: message, TaskID: *task, Stream: *stream, Binding: b,
		Dir: *dir, Subject: *subject, IssuerAddr: *issuerAddr, IdentityToken: *idToken, Audience: *audience,
		Log: env.Stdout, PeerCheckpoint: peerCheckpoint, Witness: *witness,
	})
	if err == nil {
		return 0
	}
	fmt.Fprintln(env.Stderr, "aether agent:", err)
	if hint := agentHint(err, *idToken != ""); hint != "" {
		fmt.Fprintln(env.Stderr, hint)
	}
	return 1
}

// agentHint says what to try next for the failures users meet most.
func agentHint(err error, externalIdentity bool) string {
	var rejected *agentpkg.IdentityRejectedError
	switch {
	case errors.As(err, &rejected) && !externalIdentity:
		return "The local issuer is on http://127.0.0.1: the node accepts it only when its policy sets \"allowInsecureLocalIssuers\": true\n" +
			"(a node on this computer only: a public one never accepts it), and only with the node's audience\n" +
			"(pass --audience when the policy's audience is not its publicUrl)."
	case errors.As(err, &rejected):
		return "Check the identity token: its issuer must serve a JWKS the node can reach, its aud must be the node's audience, and it must not have expired."
	case errors.Is(err, agentpkg.ErrExpired):
		return "Run the command again for a new code, and ask the owner to approve it sooner."
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "Stopped before the turn ended; a pending request expires on its own."
	}
	return ""
}
