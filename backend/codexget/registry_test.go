package codexget

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRealRegistry proves that npm's registry serves the pinned package for this machine, as
// the app gets it: the pinned size and sha512, an archive that unpacks, a codex that runs as
// codex-cli Version with its helpers. The registry is asked once per machine and pin: the
// package is kept in the tests' cache (scripts/lib/codex-tarball.sh, which fills it the same
// way), with a stamp of the pinned integrity the registry's bytes matched; with the stamp
// there, the cached package is got through a file:// registry and checked all the same. It is
// skipped when the registry cannot be reached, except in CI (CI=true), where it must run.
func TestRealRegistry(t *testing.T) {
	p, err := ForThisMachine()
	if err != nil {
		t.Skip(err)
	}
	cache := os.Getenv("CODEX_CACHE")
	if cache == "" {
		cache = filepath.Join("..", "..", ".cache", "codex-registry")
	}
	cache, err = filepath.Abs(cache)
	if err != nil {
		t.Fatal(err)
	}
	tgz := strings.TrimPrefix(p.TarballURL("file://"+cache), "file://")
	stamp := tgz + ".registry-ok"
	g := &Getter{Dir: filepath.Join(t.TempDir(), "codex-bin")}
	if st, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(st)) == p.Integrity {
		t.Logf("npm's registry served %s as pinned (%s); checking the cached package", p.Package(), stamp)
		files := &http.Transport{}
		files.RegisterProtocol("file", http.NewFileTransport(http.Dir("/")))
		g.Registry, g.Client = "file://"+cache, &http.Client{Transport: files}
	} else {
		if testing.Short() {
			t.Skip("downloads about 170 MB")
		}
		reachable(t, p)
		// The download goes to the cache as it comes; it is kept only once Get has checked it.
		if err := os.MkdirAll(filepath.Dir(tgz), 0o755); err != nil {
			t.Fatal(err)
		}
		part, err := os.CreateTemp(filepath.Dir(tgz), ".download-*")
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(part.Name())
		defer part.Close()
		if err := part.Chmod(0o644); err != nil { // the GUI and package tests read it too
			t.Fatal(err)
		}
		g.Client = &http.Client{Transport: teeTransport{to: part}}
		defer func() {
			if t.Failed() {
				return
			}
			if err := part.Close(); err == nil {
				if err := os.Rename(part.Name(), tgz); err == nil {
					os.WriteFile(stamp, []byte(p.Integrity+"\n"), 0o644)
				}
			}
		}()
	}
	bin, err := g.Get(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.Contains(string(out), "codex-cli "+Version) {
		t.Fatalf("%s --version: %q, %v", bin, out, err)
	}
	for _, helper := range []string{"bin/codex-code-mode-host", "codex-path/rg"} {
		if _, err := os.Stat(filepath.Join(g.Dir, Version, helper)); err != nil {
			t.Errorf("helper beside codex: %v", err)
		}
	}
}

// reachable skips the test when npm's registry cannot be reached, except in CI.
func reachable(t *testing.T, p Platform) {
	t.Helper()
	head, err := http.Head(p.TarballURL(DefaultRegistry))
	if err == nil {
		head.Body.Close()
	}
	if err != nil || head.StatusCode != http.StatusOK {
		msg := "the npm registry cannot be reached"
		if err != nil {
			msg += ": " + err.Error()
		} else {
			msg += ": " + head.Status
		}
		if ci := os.Getenv("CI"); ci == "true" || ci == "1" {
			t.Fatal(msg + " (CI must reach it)")
		}
		t.Skip(msg)
	}
}

// teeTransport copies every response body it carries into to.
type teeTransport struct{ to io.Writer }

func (tt teeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(resp.Body, tt.to), resp.Body}
	return resp, nil
}
