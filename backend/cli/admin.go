package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/aether/aether/backend/admin"
	"github.com/aether/aether/backend/datadir"
)

// adminVerb is `aether admin new-token|link`: the owner's sign-in credentials (docs/admin-api.md).
func adminVerb(args []string, env Env) int {
	if len(args) > 0 {
		switch args[0] {
		case "new-token":
			return adminNewToken(args[1:], env)
		case "link":
			return adminLink(args[1:], env)
		}
	}
	fmt.Fprintln(env.Stderr, "usage: aether admin new-token|link [--data-dir D]")
	return 2
}

// adminNewToken replaces the admin token: through the running node, which also ends every
// admin session and unused sign-in link, or in the data dir when no node runs (A6).
func adminNewToken(args []string, env Env) int {
	fs := newFlags("admin new-token", env)
	dir := fs.String("data-dir", "", "the node's data dir (default: the per-user data folder)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	d, err := dataDir(*dir)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether admin new-token:", err)
		return 2
	}
	running := false
	err = datadir.NewAdminToken(d)
	if errors.Is(err, datadir.ErrLocked) {
		running = true
		var c *admin.Client
		if c, err = nodeAPI(d); err == nil {
			_, err = c.RotateToken(context.Background())
		}
	}
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether admin new-token:", err)
		return 1
	}
	fmt.Fprintf(env.Stdout, "Wrote a new admin token to %s.\n", filepath.Join(d, "admin.token"))
	if running {
		fmt.Fprintln(env.Stdout, "The running node now takes only the new token: every admin session and sign-in link ended. Sign in again with a link from `aether admin link`.")
	}
	return 0
}

// adminLink prints a fresh one-time sign-in link of the running node (A1).
func adminLink(args []string, env Env) int {
	fs := newFlags("admin link", env)
	dir := fs.String("data-dir", "", "the node's data dir (default: the per-user data folder)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c, err := nodeAPI(*dir)
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether admin link:", err)
		return 1
	}
	out, err := c.SignInLink(context.Background())
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether admin link:", err)
		return 1
	}
	fmt.Fprintf(env.Stdout, "%s\n(works once, within %d minutes)\n", out.Link, out.ExpiresIn/60)
	return 0
}
