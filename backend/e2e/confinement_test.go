package e2e

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/cli"
)

// lockedBuffer is a log the node writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestConfinementUnavailable: on a machine without bubblewrap the node serves, but no turn
// runs codex: the turn ends FAILED with the reason and a receipt, and the Status page,
// `aether status` and the log say "Confinement: unavailable — …" in the same words (W15).
func TestConfinementUnavailable(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no bwrap anywhere; the fake codex is found by its path
	var log lockedBuffer
	e := newEnv(t, withLog(&log))
	const want = "Confinement: unavailable — bubblewrap is not installed"

	var st struct {
		Confinement struct {
			Available bool
			Text      string
		}
		Codex struct{ Error string }
	}
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(20 * time.Millisecond) {
		if code := e.admin.do("GET", "/api/status", nil, &st); code != 200 {
			t.Fatalf("status: %d", code)
		}
		if st.Confinement.Text != "Confinement: not checked yet" || time.Now().After(deadline) {
			break
		}
	}
	if st.Confinement.Available || !strings.HasPrefix(st.Confinement.Text, want) || !strings.Contains(st.Confinement.Text, "apt install bubblewrap") {
		t.Fatalf("W15 status confinement %+v", st.Confinement)
	}
	if st.Codex.Error != st.Confinement.Text {
		t.Errorf("codex error %q, want the confinement text", st.Codex.Error)
	}
	var out, errOut bytes.Buffer
	if code := cli.Main([]string{"status", "--data-dir", e.dataDir}, cli.Env{Stdout: &out, Stderr: &errOut}); code != 0 {
		t.Fatalf("aether status: %d %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), st.Confinement.Text+"\n") {
		t.Errorf("W15 aether status does not say %q:\n%s", st.Confinement.Text, out.String())
	}
	if !strings.Contains(log.String(), want) {
		t.Errorf("W15 the log does not say %q:\n%s", want, log.String())
	}

	alice := e.agent("alice")
	alice.allow()
	runs := e.codexRuns()
	task := alice.send(alice.client("review", a2a.TransportProtocolJSONRPC), "", "Review main.go please")
	if task.Status.State != a2a.TaskStateFailed || !strings.Contains(statusText(task), st.Confinement.Text) {
		t.Fatalf("W15 the turn ended %s: %q; want FAILED with %q", task.Status.State, statusText(task), st.Confinement.Text)
	}
	if claims := receiptClaims(t, e, task); claims.Status != "failed" || claims.Reason != st.Confinement.Text {
		t.Errorf("W15 receipt status %q reason %q", claims.Status, claims.Reason)
	}
	if n := e.codexRuns(); n != runs {
		t.Errorf("W15 codex ran %d times unconfined", n-runs)
	}
}
