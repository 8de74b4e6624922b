package cli

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aether/aether/backend/codexget"
	"github.com/aether/aether/backend/datadir"
	"github.com/aether/aether/backend/node"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/version"
)

func serve(args []string, env Env) int {
	fs := newFlags("node serve", env)
	o := node.Options{UI: env.UI}
	fs.StringVar(&o.PolicyPath, "policy", "", "policy.json with the pact section (default: the one last used with this data dir, else <data-dir>/policy.json)")
	fs.StringVar(&o.DataDir, "data-dir", "", "where the node keeps its key, certificate, token and pact.sqlite (default: the per-user data folder, "+defaultDataDirText()+")")
	fs.IntVar(&o.Port, "port", 0, "node API port on 127.0.0.1 (0 picks a free one)")
	fs.IntVar(&o.AdminPort, "admin-port", 3000, "admin UI port on 127.0.0.1 (HTTPS)")
	fs.StringVar(&o.PactListen, "pact-listen", "127.0.0.1:8080", "gateway address (plain HTTP; put a TLS proxy serving publicUrl in front)")
	fs.StringVar(&o.CodexPath, "codex", "", "codex binary (default: the one named or got on the Status page, else codex on PATH)")
	fs.StringVar(&o.CodexRegistry, "codex-registry", os.Getenv("AETHER_CODEX_REGISTRY"), "where Get Codex downloads the pinned Codex from (default: "+codexget.DefaultRegistry+")")
	fs.BoolVar(&o.Funnel, "funnel", false, "publish the gateway on the internet with Tailscale Funnel (also pact.funnel in policy.json; docs/deploy.md)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "aether node serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	// Another Tailscale control server for Funnel (tests use their own on loopback; docs/deploy.md).
	o.Reach.ControlURL = os.Getenv("AETHER_FUNNEL_CONTROL_URL")
	o.Logger = slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := node.Start(ctx, o)
	if err != nil {
		var perr *policy.Error
		switch {
		case errors.As(err, &perr):
			fmt.Fprintf(env.Stderr, "aether: policy.json has problems; the node did not start:\n%v\n", err)
		case errors.Is(err, iofs.ErrNotExist) && o.PolicyPath == "":
			fmt.Fprintf(env.Stderr, "aether: %v\nWithout --policy the node serves the policy in its data dir: write one there "+
				"(examples/policy.json is a start; `aether policy check --policy FILE` checks it), or pass --policy.\n", err)
		default:
			fmt.Fprintf(env.Stderr, "aether: %v\n", err)
		}
		return 1
	}
	fmt.Fprintf(env.Stdout, "Aether node %s is running.\n  gateway:   http://%s (publicUrl %s)\n  admin UI:  %s\n  data dir:  %s\n  policy:    %s\nPress Ctrl+C to stop.\n",
		version.String(), n.Addresses().Gateway, n.Addresses().PublicURL, signInLine(n, env), n.DataDir(), n.PolicyPath())
	go followReach(ctx, n, env)
	<-ctx.Done()
	stop()
	fmt.Fprintln(env.Stdout, "Stopping…")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Stop(sctx); err != nil {
		fmt.Fprintf(env.Stderr, "aether: stop: %v\n", err)
		return 1
	}
	return 0
}

// signInLine offers a one-time sign-in link on a terminal only: a live code must not end up in
// a log (A4), and a service's stdout is one.
func signInLine(n *node.Node, env Env) string {
	more := "`aether admin link` prints a new one"
	if f, ok := env.Stdout.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return "sign in at " + n.SignInURL() + "\n             (works once, within 5 minutes; " + more + ")"
		}
	}
	return "sign in with the link `aether admin link` prints (https://" + n.Addresses().Admin + ")"
}

func policyCheck(args []string, env Env) int {
	fs := newFlags("policy check", env)
	path := fs.String("policy", "policy.json", "policy.json to check")
	def, _ := datadir.Default()
	dataDir := fs.String("data-dir", def, "data dir of the node that will serve the policy (its key, admin token and pact.sqlite): "+
		"no workspace may be it or contain it, nor lie inside it if read_write, as a turn sees all of its workspace; the default is the node's")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	p, err := policy.Limits{DataDir: *dataDir}.Load(*path)
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return 1
	}
	if p.Pact == nil {
		fmt.Fprintf(env.Stderr, "%s: no \"pact\" section: add one (see examples/policy.json)\n", *path)
		return 1
	}
	fmt.Fprint(env.Stdout, policy.Describe(p))
	return 0
}

// defaultDataDirText names the default data dir in the flag's help.
func defaultDataDirText() string {
	d, err := datadir.Default()
	if err != nil {
		return "unknown here: " + err.Error()
	}
	return d
}
