package cli

import (
	"context"
	"fmt"

	"github.com/aether/aether/backend/node"
	"github.com/aether/aether/backend/owner"
)

// followReach prints, on the terminal of `node serve`, where to sign in to the tailnet (once
// per login URL) and the address once the gateway is published.
func followReach(ctx context.Context, n *node.Node, env Env) {
	o := n.Owner()
	events := o.Events(ctx)
	var said string
	tell := func(r owner.Reachability) {
		line := reachLine(r)
		if r.Mode != owner.ReachFunnel || line == said {
			return
		}
		said = line
		fmt.Fprintln(env.Stdout, "Tailscale Funnel: "+line)
		if r.State == owner.ReachStatePublished && !r.InUse {
			fmt.Fprintf(env.Stdout, "  agents are still told publicUrl %s; run `aether funnel use` to make it %s\n"+
				"  (grants made under the old publicUrl stop working: their agents are asked again)\n", o.PublicURL(), r.URL)
		}
	}
	tell(o.Reachability())
	for ev := range events {
		if ev.Name == owner.EventReachability || ev.Name == owner.EventPolicy {
			tell(o.Reachability())
		}
	}
}

// reachLine is the reachability in one line, as `node serve` and `aether status` print it.
func reachLine(r owner.Reachability) string {
	switch {
	case r.Mode == owner.ReachProxy:
		return "your own proxy or domain (publicUrl)"
	case r.Mode == owner.ReachTailnet && r.State == "tailnet":
		return "not reachable from the internet; on your tailnet at " + r.URL + " for your phones"
	case r.Mode != owner.ReachFunnel && r.Mode != owner.ReachTailnet:
		return "not reachable from the internet (loopback only)"
	case r.State == owner.ReachStatePublished && r.Probe == owner.ProbeUnreachable:
		return "published at " + r.URL + ", but not reachable from the internet: " + r.ProbeReason
	case r.State == owner.ReachStatePublished && r.InUse:
		return "reachable at " + r.URL
	case r.State == owner.ReachStatePublished:
		return "published at " + r.URL + " (not the publicUrl yet)"
	case r.LoginURL != "" && r.Reason != "":
		return r.Reason + ": sign in again at " + r.LoginURL
	case r.LoginURL != "":
		return "sign in to your tailnet at " + r.LoginURL
	case r.State == "failed":
		return "not reachable from the internet: " + r.Reason + " — " + r.Fix
	}
	return "joining your tailnet…"
}

func funnelVerb(args []string, env Env) int {
	if len(args) == 0 || (args[0] != "on" && args[0] != "off" && args[0] != "use") {
		fmt.Fprintln(env.Stderr, "usage: aether funnel on|off|use [--data-dir D]")
		return 2
	}
	fs := newFlags("funnel "+args[0], env)
	dir := fs.String("data-dir", "", "the node's data dir")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	c, err := nodeAPI(*dir)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether funnel:", err)
		return 1
	}
	var r owner.Reachability
	switch args[0] {
	case "use":
		r, err = c.UseFunnelURL(context.Background())
	default:
		r, err = c.SetFunnel(context.Background(), args[0] == "on")
	}
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether funnel:", err)
		return 1
	}
	fmt.Fprintln(env.Stdout, "reach     "+reachLine(r))
	return 0
}
