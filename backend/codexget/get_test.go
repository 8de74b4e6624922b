package codexget

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aether/aether/backend/codex/codextest"
)

const testTriple = "x86_64-unknown-linux-musl"

// entry is one member of a test tarball.
type entry struct {
	hdr  tar.Header
	body []byte
}

func file(name string, mode int64, body []byte) entry {
	return entry{hdr: tar.Header{Name: name, Mode: mode, Size: int64(len(body)), Typeflag: tar.TypeReg}, body: body}
}

// tarball builds a gzipped tarball of entries; a header with a body shorter than its Size is
// written as the header alone (an archive that claims more than it holds).
func tarball(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		if err := tw.WriteHeader(&e.hdr); err != nil {
			t.Fatal(err)
		}
		if int64(len(e.body)) == e.hdr.Size {
			if _, err := tw.Write(e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Flush(); err != nil && !strings.Contains(err.Error(), "missed writing") {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

// goodPackage is a platform package as npm ships it, with the fake codex as bin/codex.
func goodPackage(t *testing.T) []byte {
	fake, err := os.ReadFile(codextest.BuildFake(t))
	if err != nil {
		t.Fatal(err)
	}
	v := "package/vendor/" + testTriple + "/"
	return tarball(t,
		file("package/package.json", 0o644, []byte(`{"name":"@openai/codex","version":"0.169.0-linux-x64"}`)),
		file(v+"bin/codex", 0o755, fake),
		file(v+"bin/codex-code-mode-host", 0o755, []byte("#!/bin/sh\n")),
		file(v+"codex-path/rg", 0o755, []byte("#!/bin/sh\n")),
		file(v+"codex-resources/voice/manifest.json", 0o644, []byte("{}")),
	)
}

// pinFor pins data as the test platform's package.
func pinFor(data []byte) Platform {
	sum := sha512.Sum512(data)
	return Platform{Name: "linux-x64", Triple: testTriple, Size: int64(len(data)),
		Integrity: "sha512-" + base64.StdEncoding.EncodeToString(sum[:])}
}

// registry is a loopback stand-in for the npm registry that serves body at the platform
// package's tarball path, as serve says.
func registry(t *testing.T, serve func(w http.ResponseWriter, r *http.Request)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/@openai/codex/-/codex-"+Version+"-linux-x64.tgz" {
			http.NotFound(w, r)
			return
		}
		serve(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func serveBytes(data []byte) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data)
	}
}

// nothingRunnable asserts that dir holds no file at all: no partial unpack, no tarball.
func nothingRunnable(t *testing.T, g *Getter) {
	t.Helper()
	if bin, _ := g.Binary(); bin != "" {
		t.Errorf("a codex is in place after a refused download: %s", bin)
	}
	_ = filepath.WalkDir(g.Dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != g.Dir {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
}

func TestGetInstallsAndRuns(t *testing.T) {
	data := goodPackage(t)
	g := &Getter{Dir: filepath.Join(t.TempDir(), "codex-bin"), Registry: registry(t, serveBytes(data)), Platform: pinFor(data)}
	var last atomic.Value
	bin, err := g.Get(context.Background(), func(p Progress) { last.Store(p) })
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(g.Dir, Version, "bin", "codex"); bin != want {
		t.Fatalf("binary %s, want %s", bin, want)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "codex-cli "+Version {
		t.Fatalf("the installed codex --version: %q, %v", out, err)
	}
	if p, _ := last.Load().(Progress); p.Done != int64(len(data)) || p.Total != int64(len(data)) {
		t.Errorf("last progress %+v, want %d of %d", p, len(data), len(data))
	}
	for _, helper := range []string{"bin/codex-code-mode-host", "codex-path/rg", "codex-resources/voice/manifest.json"} {
		if _, err := os.Stat(filepath.Join(g.Dir, Version, helper)); err != nil {
			t.Errorf("helper beside codex: %v", err)
		}
	}
	entries, _ := os.ReadDir(g.Dir)
	if len(entries) != 1 || entries[0].Name() != Version {
		t.Errorf("codex-bin holds %v, want only %s", entries, Version)
	}
	again, err := g.Get(context.Background(), nil) // there already: no download
	if err != nil || again != bin {
		t.Errorf("second Get: %s, %v", again, err)
	}
}

// TestGetRefuses are the download's threats (docs/threats.md, X1–X7): each is refused with
// its error and leaves nothing in the codex folder, let alone anything runnable.
func TestGetRefuses(t *testing.T) {
	good := goodPackage(t)
	v := "package/vendor/" + testTriple + "/"
	fake, _ := os.ReadFile(codextest.BuildFake(t))
	hostile := func(entries ...entry) []byte {
		return tarball(t, append([]entry{file(v+"bin/codex", 0o755, fake)}, entries...)...)
	}
	oldCodex := tarball(t, file(v+"bin/codex", 0o755, []byte("#!/bin/sh\necho codex-cli 0.1.0\n")))
	tampered := bytes.Clone(good)
	tampered[len(tampered)/2] ^= 0x01
	type refusal struct {
		name  string
		pin   Platform
		serve func(http.ResponseWriter, *http.Request)
		want  error
	}
	// pinned: a hostile archive that is the pinned one, so that only the unpacker stands.
	pinned := func(name string, data []byte) refusal {
		return refusal{name, pinFor(data), serveBytes(data), ErrUnsafeArchive}
	}
	cases := []refusal{
		{"X1 tampered tarball", pinFor(good), serveBytes(tampered), ErrIntegrity},
		{"X1 another file of the same size", pinFor(good), serveBytes(bytes.Repeat([]byte{0x1f}, len(good))), ErrIntegrity},
		{"X2 truncated tarball", pinFor(good), serveBytes(good[:len(good)/2]), ErrTruncated},
		{"X2 connection cut mid-download", pinFor(good), func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(good)))
			w.Write(good[:len(good)/3])
		}, ErrTruncated},
		{"X2 longer than the pinned size", pinFor(good), serveBytes(append(bytes.Clone(good), 0)), ErrTruncated},
		pinned("X3 path traversal", hostile(file(v+"../../../../../escaped", 0o755, []byte("x")))),
		pinned("X3 absolute path", hostile(file("/tmp/aether-x3-escaped", 0o755, []byte("x")))),
		pinned("X4 symlink out of the folder", hostile(entry{hdr: tar.Header{Name: v + "bin/etc", Typeflag: tar.TypeSymlink, Linkname: "/etc"}})),
		pinned("X4 hard link", hostile(entry{hdr: tar.Header{Name: v + "bin/passwd", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}})),
		pinned("X5 device file", hostile(entry{hdr: tar.Header{Name: v + "bin/mem", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 1, Mode: 0o666}})),
		pinned("X5 named pipe", hostile(entry{hdr: tar.Header{Name: v + "bin/fifo", Typeflag: tar.TypeFifo, Mode: 0o666}})),
		pinned("X6 oversized entry", hostile(entry{hdr: tar.Header{Name: v + "bin/huge", Typeflag: tar.TypeReg, Mode: 0o644, Size: 600 << 20}})),
		pinned("X7 a package without codex", tarball(t, file("package/package.json", 0o644, []byte("{}")))),
		{"X7 a codex that is not the pinned version", pinFor(oldCodex), serveBytes(oldCodex), errNotPinnedCodex},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			g := &Getter{Dir: filepath.Join(base, "codex-bin"), Registry: registry(t, c.serve), Platform: c.pin}
			_, err := g.Get(context.Background(), nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("Get: %v, want %v", err, c.want)
			}
			t.Logf("refused: %v", err)
			nothingRunnable(t, g)
			for _, p := range []string{filepath.Join(base, "escaped"), "/tmp/aether-x3-escaped"} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("the archive wrote %s", p)
					os.Remove(p)
				}
			}
		})
	}
}

// TestGetOffline: no registry, or one without the package, says so and what to do, leaves
// nothing, and a later try can succeed.
func TestGetOffline(t *testing.T) {
	data := goodPackage(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // nothing listens there any more
	g := &Getter{Dir: filepath.Join(t.TempDir(), "codex-bin"), Registry: closed.URL, Platform: pinFor(data)}
	_, err := g.Get(context.Background(), nil)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "cannot be reached") || !strings.Contains(err.Error(), "try again") {
		t.Fatalf("offline: %v", err)
	}
	nothingRunnable(t, g)
	missing := &Getter{Dir: g.Dir, Registry: registry(t, http.NotFound), Platform: pinFor(data)}
	if _, err := missing.Get(context.Background(), nil); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "404") {
		t.Fatalf("no package: %v", err)
	}
	nothingRunnable(t, missing)
	retry := &Getter{Dir: g.Dir, Registry: registry(t, serveBytes(data)), Platform: pinFor(data)}
	if _, err := retry.Get(context.Background(), nil); err != nil {
		t.Fatalf("the try after: %v", err)
	}
}
