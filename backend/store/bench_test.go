package store

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
)

// noteSigner signs checkpoints with a fixed Ed25519 key, as the ledger does with the node key.
type noteSigner struct{ s note.Signer }

func (n noteSigner) Origin() string { return "node.example/log" }
func (n noteSigner) Sign(text []byte) ([]byte, error) {
	return note.Sign(&note.Note{Text: string(text)}, n.s)
}

// TestPrintB9 measures benchmark B9: what the receipts log adds to a turn, the append of its
// receipt (leaves, checkpoint signed, proof) against the same append without the log, p50 of
// appends alternated one by one on two stores seeded with 1,000 receipts. It reports; it never
// fails on timing.
func TestPrintB9(t *testing.T) {
	if os.Getenv("AETHER_BENCH") != "1" {
		t.Skip("set AETHER_BENCH=1 to run B9")
	}
	const seed, runs = 1000, 400
	key := keys.FromPrivate(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	var dbs [2]*DB
	var turns [2][]Turn
	for i := range dbs {
		dbs[i], _ = openTemp(t)
		dbs[i].noLog = i == 0
		if i == 1 {
			dbs[i].SetCheckpointSigner(noteSigner{key.NoteSigner("node.example/log")})
		}
		rcGrant(t, dbs[i], "g1")
		var seeded []Turn
		for n := 1; n <= seed; n++ {
			tr := rcTurn(n)
			tr.Status = domain.TurnCompleted
			seeded = append(seeded, tr)
		}
		rcSeed(t, dbs[i], seeded, 500)
		for n := seed + 1; n <= seed+runs; n++ {
			tr := rcTurn(n)
			if err := dbs[i].StartTurn(context.Background(), tr); err != nil {
				t.Fatal(err)
			}
			turns[i] = append(turns[i], tr)
		}
	}
	ctx := context.Background()
	var took [2][]time.Duration
	for k := range runs {
		for i, db := range dbs {
			seq := int64(seed + k + 1)
			r := rcReceipt(turns[i][k], seq, rcPrev(seq))
			start := time.Now()
			if err := db.AppendReceipts(ctx, signed([]Receipt{r})); err != nil {
				t.Fatal(err)
			}
			took[i] = append(took[i], time.Since(start))
		}
	}
	p50 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	without, with := p50(took[0]), p50(took[1])
	fmt.Printf("B9 log-per-turn p50 without=%v with=%v added=%v\n", without.Round(time.Microsecond), with.Round(time.Microsecond), (with - without).Round(time.Microsecond))
}
