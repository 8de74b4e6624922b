package node

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/codex/mockmodel"
	"github.com/aether/aether/backend/codexget"
	"github.com/aether/aether/backend/owner"
)

// fakePackage is a platform package holding the fake codex, served by a loopback stand-in for
// npm's registry; the returned platform pins it.
func fakePackage(t *testing.T) (registry string, pin codexget.Platform) {
	t.Helper()
	fake, err := os.ReadFile(codextest.BuildFake(t))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "package/vendor/fake-triple/bin/codex", Mode: 0o755, Size: int64(len(fake)), Typeflag: tar.TypeReg})
	tw.Write(fake)
	tw.Close()
	zw.Close()
	data := buf.Bytes()
	sum := sha512.Sum512(data)
	pin = codexget.Platform{Name: "linux-x64", Triple: "fake-triple", Size: int64(len(data)),
		Integrity: "sha512-" + base64.StdEncoding.EncodeToString(sum[:])}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/@openai/codex/-/codex-"+codexget.Version+"-linux-x64.tgz" {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, pin
}

// syncLog is a log the test reads while the node writes it.
type syncLog struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu <- struct{}{}
	defer func() { <-l.mu }()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu <- struct{}{}
	defer func() { <-l.mu }()
	return l.buf.String()
}

// TestCodexFromTheWindow: a node with no codex anywhere gets it, a key and a server from the
// owner's service, as the Status page calls them, and its checklist follows. The key is never
// in an answer or the log.
func TestCodexFromTheWindow(t *testing.T) {
	t.Setenv("PATH", "/usr/bin:/bin") // no codex on it
	t.Setenv("CODEX_API_KEY", "")
	registry, pin := fakePackage(t)
	root := t.TempDir()
	log := &syncLog{mu: make(chan struct{}, 1)}
	n := startFirstRun(t, root, registry, slog.New(slog.NewTextHandler(log, nil)))
	n.setup.Getter().Platform = pin
	svc, ctx := n.Owner(), context.Background()
	step := func(id string) owner.SetupStep {
		n.setup.CheckHealth(ctx)
		st, err := svc.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st.Setup {
			if s.ID == id {
				return s
			}
		}
		t.Fatalf("no step %s in %+v", id, st.Setup)
		return owner.SetupStep{}
	}
	if s := step(owner.StepCodex); s.Done {
		t.Fatalf("codex step done with no codex: %+v", s)
	}

	if _, err := svc.GetCodex(); err != nil {
		t.Fatal(err)
	}
	var dl owner.CodexDownload
	for end := time.Now().Add(3 * time.Minute); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if dl, _ = svc.CodexDownload(); dl.State != owner.DownloadRunning {
			break
		}
	}
	want := filepath.Join(n.DataDir(), "codex-bin", codexget.Version, "bin", "codex")
	if dl.State != owner.DownloadInstalled || dl.Path != want || dl.Done != pin.Size {
		t.Fatalf("download %+v", dl)
	}
	if s := step(owner.StepCodex); !s.Done {
		t.Fatalf("codex step after Get Codex: %+v", s)
	}
	if h, _ := n.setup.Health(); h.Path != want {
		t.Fatalf("the node runs %s, want the one it got", h.Path)
	}

	const key = "sk-window-set-0f9e8d7c6b5a"
	if s := step(owner.StepModel); s.Done {
		t.Fatalf("model step done with no key: %+v", s)
	}
	m, err := svc.SetModel(owner.ModelRequest{Key: ptr(key)})
	if err != nil || !m.KeySet {
		t.Fatalf("set key: %+v, %v", m, err)
	}
	if fi, err := os.Stat(filepath.Join(n.DataDir(), "model.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("model.key: %v, %v", fi, err)
	}
	if s := step(owner.StepModel); !s.Done {
		t.Fatalf("model step with a key: %+v", s)
	}
	c, _ := svc.CheckModel(ctx) // the fake codex, confined, answers
	if !c.OK || c.Answer == "" {
		t.Fatalf("check %+v", c)
	}
	st, _ := svc.Status(ctx)
	body, _ := json.Marshal(st)
	if strings.Contains(string(body), key) || strings.Contains(log.String(), key) {
		t.Fatalf("the key was shown back or logged")
	}
	if m, _ = svc.SetModel(owner.ModelRequest{RemoveKey: true}); m.KeySet || m.Check != nil {
		t.Fatalf("after removing the key: %+v", m)
	}
	if _, err := svc.SetModel(owner.ModelRequest{BaseURL: ptr("http://llm.example/v1")}); err == nil {
		t.Fatal("a plain-http server elsewhere was taken")
	}
}

// TestCheckRealCodex: "Use a Codex I installed" names the real codex, the window's server is
// the mock model, and Check shows OK, then the exact error of a refused key.
func TestCheckRealCodex(t *testing.T) {
	bin := os.Getenv("AETHER_REAL_CODEX")
	if bin == "" {
		t.Skip("no real codex: set AETHER_REAL_CODEX=$(scripts/install-codex.sh)")
	}
	t.Setenv("PATH", "/usr/bin:/bin")
	root := t.TempDir()
	n := startFirstRun(t, root, "", slog.New(slog.DiscardHandler))
	svc, ctx := n.Owner(), context.Background()
	if _, err := svc.UseCodex(bin); err != nil {
		t.Fatal(err)
	}
	upstream := mockmodel.New(mockmodel.Message("OK"), mockmodel.HTTPError(401, `{"error":{"message":"Incorrect API key provided.","code":"invalid_api_key"}}`))
	defer upstream.Close()
	if _, err := svc.SetModel(owner.ModelRequest{BaseURL: ptr(upstream.BaseURL()), Model: ptr("mock-model"), Key: ptr("sk-check-1234")}); err != nil {
		t.Fatal(err)
	}
	if c, _ := svc.CheckModel(ctx); !c.OK || c.Answer != "OK" {
		t.Fatalf("check against the mock upstream: %+v", c)
	}
	if got := upstream.Requests()[0].Header.Get("Authorization"); got != "Bearer sk-check-1234" {
		t.Fatalf("the upstream got %q", got)
	}
	c, _ := svc.CheckModel(ctx)
	// The model gateway says it in the owner's words, with the server's own (docs/model-gateway.md).
	if c.OK || !strings.Contains(c.Error, "refused the owner's key") || !strings.Contains(c.Error, "HTTP 401") {
		t.Fatalf("check with a refused key: %+v", c)
	}
	t.Logf("Check's error: %s", c.Error)
}

func ptr(s string) *string { return &s }

// startFirstRun starts a desktop node on a starter policy in root/data, as a first run does,
// getting Codex from registry; it is stopped when the test ends.
func startFirstRun(t *testing.T, root, registry string, logger *slog.Logger) *Node {
	t.Helper()
	n, err := Start(context.Background(), Options{DataDir: filepath.Join(root, "data"), PactListen: "127.0.0.1:0",
		StarterPolicy: true, Desktop: true, CodexRegistry: registry, CodexHome: codextest.Home(t), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Stop(ctx)
	})
	return n
}
