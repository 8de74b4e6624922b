package codexsetup

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/codexget"
	"github.com/aether/aether/backend/model"
	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/store"
	"github.com/aether/aether/backend/turn"
)

// TestSettings: the runner runs the Codex the owner named, and health follows it; what is not
// an executable file, or a key given and removed at once, is the owner's ErrInvalid and
// changes nothing.
func TestSettings(t *testing.T) {
	t.Setenv("PATH", "/usr/bin:/bin") // no codex on it
	dir := t.TempDir()
	r := &codex.Runner{Home: codextest.Home(t), StateDir: filepath.Join(dir, "codex")}
	s := New(Config{Runner: r, Models: &model.Store{Dir: dir}, Getter: &codexget.Getter{Dir: filepath.Join(dir, "codex-bin")},
		ProbeDir: filepath.Join(dir, "codex"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer s.Close()
	if bin, err := r.Find(); bin != "" || err != nil {
		t.Fatalf("with nothing set or got, the runner looks for %q (%v)", bin, err)
	}

	notExec := filepath.Join(dir, "codex.txt")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.UseCodex(notExec); !errors.Is(err, owner.ErrInvalid) {
		t.Fatalf("a file that is not executable: %v", err)
	}
	if bin, _ := r.Find(); bin != "" {
		t.Fatal("a refused Codex was kept")
	}

	fake := codextest.BuildFake(t)
	if err := s.UseCodex(fake); err != nil {
		t.Fatal(err)
	}
	if bin, _ := r.Find(); bin != fake {
		t.Fatalf("the runner looks for %q, want the one the owner named", bin)
	}
	if st, _ := s.Health(); !st.Found || st.Path != fake {
		t.Fatalf("health after naming a Codex: %+v", st)
	}

	key := "sk-both-1234"
	if _, err := s.SetModel(owner.ModelRequest{Key: &key, RemoveKey: true}); !errors.Is(err, owner.ErrInvalid) {
		t.Fatalf("a key given and removed at once: %v", err)
	}
	if m, _ := s.Model(); m.KeySet {
		t.Fatal("a refused request set the key")
	}
	up, err := r.Upstream()
	if err != nil || up.KeySet {
		t.Fatalf("the runner's upstream: %+v, %v", up, err)
	}
}

// TestKeyBelongsToItsServer: a key saved for one server is never sent to another named
// later, and a change the node refuses changes nothing (docs/threats.md M16).
func TestKeyBelongsToItsServer(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n")
	}))
	defer srv.Close()
	dir := t.TempDir()
	r := &codex.Runner{Home: codextest.Home(t), StateDir: filepath.Join(dir, "codex")}
	s := New(Config{Runner: r, Models: &model.Store{Dir: dir}, Getter: &codexget.Getter{Dir: filepath.Join(dir, "codex-bin")},
		ProbeDir: filepath.Join(dir, "codex"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer s.Close()
	db, err := store.Open(filepath.Join(dir, "pact.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := s.StartModels(db); err != nil {
		t.Fatal(err)
	}
	ask := func(t *testing.T) string {
		t.Helper()
		p, err := s.OpenPass(turn.ModelTurn{Turn: "t", Deadline: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		req, _ := http.NewRequest(http.MethodPost, p.Provider.BaseURL+"/responses", strings.NewReader(`{"model":"m"}`))
		req.Header.Set("Authorization", "Bearer "+p.Provider.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		if len(auth) == 0 {
			t.Fatal("the server was not asked")
		}
		return auth[len(auth)-1]
	}
	openaiKey := "sk-openai-owner-1234"
	if _, err := s.SetModel(owner.ModelRequest{Key: &openaiKey}); err != nil {
		t.Fatal(err)
	}
	t.Run("M16 a key saved for OpenAI, then another server named", func(t *testing.T) {
		base := srv.URL + "/v1"
		m, err := s.SetModel(owner.ModelRequest{BaseURL: &base})
		if err != nil {
			t.Fatal(err)
		}
		if m.KeySet || m.KeyFor != model.OpenAIBaseURL {
			t.Errorf("the Status page says keySet %v, keyFor %q", m.KeySet, m.KeyFor)
		}
		if got := ask(t); got != "" {
			t.Errorf("the server named later got Authorization %q", got)
		}
	})
	t.Run("M16 a refused change of server and key changes nothing", func(t *testing.T) {
		serverKey := "sk-server-5678"
		if _, err := s.SetModel(owner.ModelRequest{Key: &serverKey}); err != nil {
			t.Fatal(err)
		}
		if got := ask(t); got != "Bearer "+serverKey {
			t.Fatalf("the server's own key: %q", got)
		}
		other, bad := "https://elsewhere.example/v1", "not a key"
		if _, err := s.SetModel(owner.ModelRequest{BaseURL: &other, Key: &bad}); !errors.Is(err, owner.ErrInvalid) {
			t.Fatalf("a refused key: %v", err)
		}
		if m, _ := s.Model(); m.BaseURL != srv.URL+"/v1" || !m.KeySet {
			t.Errorf("after the refused change: %+v", m)
		}
		if got := ask(t); got != "Bearer "+serverKey {
			t.Errorf("after the refused change the server got %q", got)
		}
	})
}

// TestPinNote: the Status page names the pinned Codex, and says when the codex in use is an
// older or newer release than it, with what may differ; nothing for the pin itself, and
// nothing where the version is not supported (the error says that).
func TestPinNote(t *testing.T) {
	pin := codexget.Version
	if codex.TestedVersion != pin {
		t.Fatalf("tested %s, pinned %s", codex.TestedVersion, pin)
	}
	for _, tc := range []struct {
		version   string
		supported bool
		want      string
	}{
		{pin, true, ""},
		{"", false, ""},
		{"0.150.0", false, ""},
		{codex.MinVersion, true, "Codex " + codex.MinVersion + " is older than " + pin + ", the release this Aether pins"},
		{"9.0.0", true, "Codex 9.0.0 is newer than " + pin + ", the release this Aether pins"},
	} {
		got := pinNote(tc.version, tc.supported)
		if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q…", tc.version, got, tc.want)
		}
		if got != "" && !strings.Contains(got, "To run "+pin+", empty the codex path and use Get Codex.") {
			t.Errorf("%s: %q does not say how to run the pinned release", tc.version, got)
		}
	}
}
