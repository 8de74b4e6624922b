package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aether/aether/backend/admin"
	"github.com/aether/aether/backend/datadir"
)

// nodeAPI is the running node's API client, with the admin token from the data dir.
func nodeAPI(dir string) (*admin.Client, error) {
	d, err := dataDir(dir)
	if err != nil {
		return nil, err
	}
	addr, tok, err := datadir.LocalAPI(d)
	if err != nil {
		return nil, err
	}
	return admin.NewClient(addr, tok), nil
}

func status(args []string, env Env) int {
	fs := newFlags("status", env)
	dir := fs.String("data-dir", "", "the node's data dir")
	asJSON := fs.Bool("json", false, "print the raw JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c, err := nodeAPI(*dir)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether status:", err)
		return 1
	}
	st, err := c.Status(context.Background())
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether status:", err)
		return 1
	}
	if *asJSON {
		data, err := json.Marshal(st) // the node's bytes: the same type encodes them
		if err != nil {
			fmt.Fprintln(env.Stderr, "aether status:", err)
			return 1
		}
		fmt.Fprintln(env.Stdout, string(data))
		return 0
	}
	state := "serving"
	switch {
	case !st.Gateway.Running:
		state = "stopped"
	case st.Gateway.Paused:
		state = "paused"
	}
	fmt.Fprintf(env.Stdout, "gateway   %s (%s), publicUrl %s\nadmin UI  %s\npolicy    %s\n", st.Gateway.Listen, state, st.Gateway.PublicURL, st.Admin.URL, st.Policy.Path)
	if st.Policy.Error != nil {
		fmt.Fprintf(env.Stdout, "          ERROR: %s\n", st.Policy.Error.Message)
	}
	for _, b := range st.Brands {
		fmt.Fprintf(env.Stdout, "brand     %s (%s, %s) %s\n", b.ID, b.Name, b.AccessMode, b.CardURL)
	}
	codex := "not found"
	if st.Codex.Found {
		codex = fmt.Sprintf("%s %s, signed in: %v", st.Codex.Path, st.Codex.Version, st.Codex.LoggedIn)
	}
	if st.Codex.Credential.Summary != "" {
		codex += "; credential: " + st.Codex.Credential.Summary
	}
	if st.Codex.Error != "" {
		codex += " — " + st.Codex.Error
	}
	fmt.Fprintf(env.Stdout, "codex     %s\n%s\npending   %d request(s)\nreach     %s\n", codex, st.Confinement.Text, st.Pending, reachLine(st.Reachability))
	return 0
}

func grants(args []string, env Env) int {
	if len(args) == 0 {
		fmt.Fprintln(env.Stderr, "usage: aether grants list|revoke ID [--data-dir D]")
		return 2
	}
	fs := newFlags("grants "+args[0], env)
	dir := fs.String("data-dir", "", "the node's data dir")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	c, err := nodeAPI(*dir)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether grants:", err)
		return 1
	}
	ctx := context.Background()
	switch args[0] {
	case "list":
		gs, err := c.Grants(ctx)
		if err != nil {
			fmt.Fprintln(env.Stderr, "aether grants:", err)
			return 1
		}
		// The agent as every front door shows it (docs/threats.md C13).
		for _, g := range gs {
			fmt.Fprintf(env.Stdout, "%s  %-8s agent %s (host %s)  brand=%s scope=%s uses=%d\n", g.ID, g.Status, g.Agent.Claim, g.Agent.Host, g.Brand.ID, g.Scope.ID, g.Uses)
		}
		return 0
	case "revoke":
		if fs.NArg() != 1 {
			fmt.Fprintln(env.Stderr, "usage: aether grants revoke ID [--data-dir D]")
			return 2
		}
		g, err := c.Revoke(ctx, fs.Arg(0))
		if err != nil {
			fmt.Fprintln(env.Stderr, "aether grants:", err)
			return 1
		}
		fmt.Fprintf(env.Stdout, "%s is %s\n", g.ID, g.Status)
		return 0
	}
	fmt.Fprintln(env.Stderr, "usage: aether grants list|revoke ID [--data-dir D]")
	return 2
}
