package cli

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/aether/aether/backend/codexget"
	"github.com/aether/aether/backend/datadir"
)

// codexVerb is `aether codex pin|get`: the pinned Codex that the Status page's Get Codex
// downloads, for scripts (scripts/install-codex.sh reads the pin from here).
func codexVerb(args []string, env Env) int {
	if len(args) > 0 {
		switch args[0] {
		case "pin":
			return codexPin(env)
		case "get":
			return codexGet(args[1:], env)
		}
	}
	fmt.Fprintln(env.Stderr, "usage: aether codex pin | aether codex get [--dir D] [--registry URL|file:///DIR]")
	return 2
}

// codexPin prints one line per platform: version, platform, package, tarball URL, integrity, size.
func codexPin(env Env) int {
	for _, goarch := range []string{"amd64", "arm64"} {
		p, err := codexget.For("linux", goarch)
		if err != nil {
			fmt.Fprintln(env.Stderr, "aether codex pin:", err)
			return 1
		}
		fmt.Fprintf(env.Stdout, "%s linux/%s %s %s %s %d\n", codexget.Version, goarch, p.Package(),
			p.TarballURL(codexget.DefaultRegistry), p.Integrity, p.Size)
	}
	return 0
}

// codexGet gets the pinned Codex into --dir (default: the data dir's, where the node looks) and
// prints the binary's path.
func codexGet(args []string, env Env) int {
	fs := newFlags("codex get", env)
	dir := fs.String("dir", "", "where to put it (default: <data dir>/codex-bin, where the node finds it)")
	registry := fs.String("registry", os.Getenv("AETHER_CODEX_REGISTRY"), "the npm registry (default: "+codexget.DefaultRegistry+
		"), or file:///DIR: a folder laid out as it, e.g. the tests' cache of the pinned package (scripts/lib/codex-tarball.sh)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		data, err := datadir.Default()
		if err != nil {
			fmt.Fprintln(env.Stderr, "aether codex get:", err)
			return 1
		}
		*dir = filepath.Join(data, "codex-bin")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	g := &codexget.Getter{Dir: *dir, Registry: *registry}
	if strings.HasPrefix(*registry, "file://") {
		// The tarball is checked against the pin all the same: a folder is trusted no more.
		files := &http.Transport{}
		files.RegisterProtocol("file", http.NewFileTransport(http.Dir("/")))
		g.Client = &http.Client{Transport: files}
	}
	last := int64(-1)
	bin, err := g.Get(ctx, func(p codexget.Progress) {
		if pct := p.Done * 10 / max(p.Total, 1); pct != last {
			last = pct
			fmt.Fprintf(env.Stderr, "codex %s: %d of %d MB\n", codexget.Version, p.Done>>20, p.Total>>20)
		}
	})
	if err != nil {
		fmt.Fprintln(env.Stderr, "aether codex get:", err)
		return 1
	}
	fmt.Fprintln(env.Stdout, bin)
	return 0
}
