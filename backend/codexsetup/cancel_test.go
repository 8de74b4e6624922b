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
	"testing"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/codexget"
	"github.com/aether/aether/backend/model"
	"github.com/aether/aether/backend/owner"
)

// TestCancelGetCodex: a registry that sends its headers and then nothing holds Get Codex
// (X12): a second press says a download runs, Cancel stops it and leaves nothing, and Get
// Codex starts again.
func TestCancelGetCodex(t *testing.T) {
	t.Run("X12 a second press and Cancel while the registry stalls", testCancelGetCodex)
}

func testCancelGetCodex(t *testing.T) {
	asked := make(chan struct{}, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		asked <- struct{}{}
		<-r.Context().Done()
	}))
	defer srv.Close()
	dir := t.TempDir()
	bins := filepath.Join(dir, "codex-bin")
	r := &codex.Runner{Home: codextest.Home(t), StateDir: filepath.Join(dir, "codex")}
	s := New(Config{Runner: r, Models: &model.Store{Dir: dir}, Getter: &codexget.Getter{Dir: bins, Registry: srv.URL},
		ProbeDir: filepath.Join(dir, "codex"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer s.Close()
	if s.CodexDownload().State == owner.DownloadUnavailable {
		t.Skip("no pinned Codex for this machine")
	}

	if err := s.CancelCodex(); !errors.Is(err, owner.ErrInvalid) {
		t.Fatalf("Cancel with nothing running: %v", err)
	}
	if err := s.GetCodex(); err != nil {
		t.Fatal(err)
	}
	<-asked // the registry has sent its headers and stalls
	err := s.GetCodex()
	if !errors.Is(err, owner.ErrInvalid) || !strings.Contains(err.Error(), "being downloaded already") {
		t.Fatalf("X12 a second press while one runs: %v; want it refused, saying so", err)
	}
	if err := s.CancelCodex(); err != nil {
		t.Fatalf("X12 Cancel: %v", err)
	}
	s.bg.Wait()
	if d := s.CodexDownload(); d.State != owner.DownloadIdle || d.Error != "" || d.Done != 0 {
		t.Fatalf("after Cancel: %+v; want idle", d)
	}
	if left, _ := os.ReadDir(bins); len(left) != 0 {
		t.Fatalf("Cancel left %v in %s", left, bins)
	}
	if err := s.GetCodex(); err != nil || s.CodexDownload().State != owner.DownloadRunning {
		t.Fatalf("Get Codex after Cancel: %v %+v", err, s.CodexDownload())
	}
	<-asked
	if err := s.CancelCodex(); err != nil {
		t.Fatal(err)
	}
}
