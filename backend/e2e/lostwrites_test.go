//go:build linux

package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/store"
)

// TestLostAcknowledgedReceipts runs the real node on storage that loses its last writes: a
// turn's receipt is handed to the agent, the node is killed with SIGKILL, and pact.sqlite's
// WAL is cut back to its size before the turn, as a disk that acknowledged writes it never
// kept leaves it. The receipt the agent holds is gone from the file.
func TestLostAcknowledgedReceipts(t *testing.T) {
	t.Parallel()
	s := newServedEnv(t)
	e := s.e
	s.serve()
	alice := e.agent("alice")
	alice.allow()
	c := alice.client("review", a2a.TransportProtocolJSONRPC)
	if first := alice.send(c, "", "Review main.go please"); first.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("first turn ended %s: %q", first.Status.State, statusText(first))
	}
	wal := filepath.Join(e.dataDir, "pact.sqlite-wal")
	walBefore := fileSize(t, wal)
	held := alice.send(c, "", "Review main.go again")
	if held.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("second turn ended %s: %q", held.Status.State, statusText(held))
	}
	claims := receiptClaims(t, e, held)
	_, jws := artifacts(t, held)
	hash := receipts.HashBytes([]byte(jws))
	s.kill9()
	if after := fileSize(t, wal); after <= walBefore {
		t.Fatalf("the WAL did not grow with the turn (%d then %d bytes): nothing to cut", walBefore, after)
	}
	if err := os.Truncate(wal, walBefore); err != nil {
		t.Fatal(err)
	}

	t.Run("T14 WAL cut back after an acknowledged receipt: the node refuses to start and names it", func(t *testing.T) {
		for range 2 { // and again: the refusal is not a one-off
			out := s.refusedStart(c, alice, func(next *receipts.Claims) {
				t.Errorf("the node started on a store that lost receipt %d, which the agent holds", claims.Seq)
				if next.Seq == claims.Seq {
					t.Errorf("and signed receipt %d again, for another turn: %s, where the agent holds %s", next.Seq, next.RID, claims.RID)
				}
			})
			t.Logf("the node said: %s", out)
			for _, want := range []string{"lost receipts", "receipt " + strconv.FormatInt(claims.Seq, 10) + " " + claims.RID,
				"hash " + hash, "an agent may hold it", "move " + filepath.Join(e.dataDir, "receipts.head") + " aside",
				"signs other receipts at the lost seqs"} {
				if !strings.Contains(out, want) {
					t.Errorf("the refusal does not say %q:\n%s", want, out)
				}
			}
		}
		// Nothing was signed at the seq the agent holds: the file ends before it.
		db, err := store.Open(filepath.Join(e.dataDir, "pact.sqlite"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		head, err := db.ReceiptHead(context.Background())
		if err != nil || head.Seq != claims.Seq-1 {
			t.Fatalf("the store's tail is %+v (%v), want seq %d: the cut did not take the receipt", head, err, claims.Seq-1)
		}
		if r, err := db.ReceiptAt(context.Background(), claims.Seq); !errors.Is(err, store.ErrReceiptNotFound) {
			t.Fatalf("a second receipt at seq %d: %+v (%v)", claims.Seq, r, err)
		}
	})
}

// refusedStart starts the node and wants it to exit without serving; it returns what the node
// wrote meanwhile. A node that serves instead is asked for a turn (signed, whose receipt goes
// to served) and stopped, and the refusal is "(the node served)".
func (s *served) refusedStart(c *a2aclient.Client, a *agent, served func(*receipts.Claims)) string {
	t := s.e.t
	t.Helper()
	from := fileSize(t, s.log)
	s.spawn()
	for deadline := time.Now().Add(waitLimit); ; {
		if time.Now().After(deadline) {
			t.Fatalf("the node neither served nor exited within %s", waitLimit)
		}
		select {
		case err := <-s.done:
			s.cmd = nil
			if err == nil {
				t.Fatal("the node exited 0")
			}
			data, err := os.ReadFile(s.log)
			if err != nil {
				t.Fatal(err)
			}
			return string(data[from:])
		case <-time.After(20 * time.Millisecond):
		}
		if resp, err := http.Get(s.e.publicURL + "/healthz"); err == nil {
			resp.Body.Close()
			s.ready()
			task := a.send(c, "", "Review main.go once more")
			served(receiptClaims(t, s.e, task))
			s.stop()
			return "(the node served)"
		}
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
