package receipts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aether/aether/backend/store"
)

// slice is a Source over rows; after rows, it yields tail if set.
func slice(rows []store.Receipt, tail error) Source {
	return func(yield func(store.Receipt, error) bool) {
		for _, r := range rows {
			if !yield(r, nil) {
				return
			}
		}
		if tail != nil {
			yield(store.Receipt{}, tail)
		}
	}
}

// TestVerifyAcrossBatches: verify checks receipts in batches on every core, yet reports the
// first bad receipt of the chain, as a walk one receipt at a time would, wherever it is (at the
// edges of a batch too), even when a later receipt is bad in another way.
func TestVerifyAcrossBatches(t *testing.T) {
	e := newEnv(t)
	const n = 4*verifyChunk + 10
	seedScale(t, e, n)
	good := e.rows()
	set := only(e.key.Set())
	ctx := context.Background()
	check := func(t *testing.T, rows []store.Receipt, tail error) *Report {
		t.Helper()
		rep, err := Verify(ctx, slice(rows, tail), set, VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	wantOK(t, check(t, good, nil), n)

	for _, i := range []int{0, verifyChunk - 1, verifyChunk, verifyChunk + 1, 2*verifyChunk - 1, n - 1} {
		t.Run(fmt.Sprintf("edited column at index %d", i), func(t *testing.T) {
			rows := slices.Clone(good)
			rows[i].Reason = "edited"
			rep := check(t, rows, nil)
			wantProblem(t, rep, int64(i+1), rows[i].ID, `column reason is "edited"`)
			if rep.Count != i || rep.LastSeq != int64(i) {
				t.Errorf("count %d last seq %d, want %d good receipts before it", rep.Count, rep.LastSeq, i)
			}
		})
		if i == 0 || i == n-1 {
			continue
		}
		t.Run(fmt.Sprintf("receipt deleted at index %d, a later one forged", i), func(t *testing.T) {
			rows := slices.Delete(slices.Clone(good), i, i+1)
			rows[len(rows)-1].JWS += "x" // bad on its own, and checked long before the walk gets there
			wantProblem(t, check(t, rows, nil), int64(i+2), "", fmt.Sprintf("receipt %d is missing", i+1))
		})
	}
	t.Run("the source's problem after the good receipts", func(t *testing.T) {
		p := &Problem{Reason: "line 700 is not a receipt"}
		rep := check(t, good[:700], fmt.Errorf("read: %w", p))
		if rep.OK || rep.Problem != p || rep.Count != 700 {
			t.Fatalf("report %+v, want 700 good receipts and the source's problem", rep)
		}
	})
	t.Run("a bad receipt before the source's problem wins", func(t *testing.T) {
		rows := slices.Clone(good[:700])
		rows[650].Brand = "edited"
		wantProblem(t, check(t, rows, &Problem{Reason: "line 700 is not a receipt"}), 651, rows[650].ID, "column brand")
	})
	t.Run("a source that cannot be read is an error, not a report", func(t *testing.T) {
		broken := errors.New("disk on fire")
		rep, err := Verify(ctx, slice(good[:700], broken), set, VerifyOptions{})
		if rep != nil || !errors.Is(err, broken) || err.Error() != "verify receipts: disk on fire" {
			t.Fatalf("Verify = %+v, %v; want the read error", rep, err)
		}
	})
	t.Run("a canceled verify stops with ctx's error", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		src := func(yield func(store.Receipt, error) bool) {
			for i, r := range good {
				if i == 600 {
					cancel()
				}
				if !yield(r, nil) {
					return
				}
			}
		}
		if rep, err := Verify(cctx, src, set, VerifyOptions{}); rep != nil || !errors.Is(err, context.Canceled) {
			t.Fatalf("Verify = %+v, %v; want context.Canceled", rep, err)
		}
	})
}
