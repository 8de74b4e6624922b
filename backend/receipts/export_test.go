package receipts

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/store"
)

func exportLines(t *testing.T, src Source) []string {
	t.Helper()
	var buf bytes.Buffer
	if err := Export(context.Background(), src, &buf); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
}

func verifyLines(t *testing.T, lines []string, opts VerifyOptions) *Report {
	t.Helper()
	rep, err := Verify(context.Background(), ReadJSONL(strings.NewReader(strings.Join(lines, "\n")+"\n")), only(testKey(1).Set()), opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// editLine replaces old with new in an export line, leaving every other byte as it is.
func editLine(t *testing.T, line, old, new string) string {
	t.Helper()
	if !strings.Contains(line, old) {
		t.Fatalf("the line has no %s", old)
	}
	return strings.Replace(line, old, new, 1)
}

func TestExport(t *testing.T) {
	e := newEnv(t)
	e.run(0, 20, 4)
	ctx := context.Background()
	rows := e.rows()
	lines := exportLines(t, e.l.Source(ctx, store.ReceiptFilter{}))
	if len(lines) != 20 {
		t.Fatalf("%d lines", len(lines))
	}
	var first struct {
		Seq    int64  `json:"seq"`
		ID     string `json:"id"`
		Hash   string `json:"hash"`
		Prev   string `json:"prev"`
		JWS    string `json:"jws"`
		Claims Claims `json:"claims"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.Seq != 1 || first.ID != rows[0].ID || first.Hash != rows[0].Hash || first.Prev != rows[0].PrevHash ||
		first.JWS != rows[0].JWS || first.Claims.Turn != rows[0].TurnID || first.Claims.Agent.Issuer != "https://agent.example" {
		t.Errorf("first line = %+v", first)
	}
	wantOK(t, verifyLines(t, lines, VerifyOptions{Issuer: testIssuer}), 20)

	t.Run("filtered export", func(t *testing.T) {
		sub := exportLines(t, e.l.Source(ctx, store.ReceiptFilter{Agent: "user-2"}))
		if len(sub) != 6 || !strings.Contains(sub[0], `"sub":"user-2"`) {
			t.Errorf("%d lines: %s", len(sub), sub[0])
		}
	})

	r10 := rows[9]
	edited := func(i int, line string) []string {
		out := append([]string{}, lines...)
		out[i] = line
		return out
	}
	t.Run("T1 edited claims shown in the export", func(t *testing.T) {
		l := editLine(t, lines[9], `"ans":"`, `"ans":"0`)
		wantProblem(t, verifyLines(t, edited(9, l), VerifyOptions{}), 10, r10.ID, "claims shown differ")
	})
	t.Run("T1 edited JWS in the export", func(t *testing.T) {
		l := editLine(t, lines[9], r10.JWS, r10.JWS[:len(r10.JWS)-4]+"AAAA")
		wantProblem(t, verifyLines(t, edited(9, l), VerifyOptions{}), 10, r10.ID, "does not verify")
	})
	t.Run("T1 edited hash in the export", func(t *testing.T) {
		l := editLine(t, lines[9], `"hash":"`+r10.Hash, `"hash":"`+strings.Repeat("0", 64))
		wantProblem(t, verifyLines(t, edited(9, l), VerifyOptions{}), 10, r10.ID, "stored hash")
	})
	t.Run("T2 two lines swapped", func(t *testing.T) {
		swapped := append([]string{}, lines...)
		swapped[9], swapped[10] = swapped[10], swapped[9]
		wantProblem(t, verifyLines(t, swapped, VerifyOptions{}), 11, rows[10].ID, "receipt 10 is missing")
	})
	t.Run("T3 middle line deleted", func(t *testing.T) {
		cut := append(append([]string{}, lines[:9]...), lines[10:]...)
		wantProblem(t, verifyLines(t, cut, VerifyOptions{}), 11, rows[10].ID, "receipt 10 is missing")
	})
	t.Run("T4 last lines deleted", func(t *testing.T) {
		wantOK(t, verifyLines(t, lines[:15], VerifyOptions{}), 15)
		hw := store.Checkpoint{Seq: 20, Hash: rows[19].Hash}
		wantProblem(t, verifyLines(t, lines[:15], VerifyOptions{Expect: &hw}), 20, "", "chain ends at seq 15")
		wantOK(t, verifyLines(t, lines, VerifyOptions{Expect: &hw}), 20)
	})
	// A second receipt validly signed on top of receipt 9, as a node that
	// forked its chain would make.
	fork := func() string {
		tr := testTurn(900)
		_, recs, err := e.l.sign([]Turn{tr}, store.Checkpoint{Seq: 9, Hash: rows[8].Hash}, func(domain.GrantID) (bool, error) { return false, nil })
		if err != nil {
			t.Fatal(err)
		}
		r := recs[0]
		var buf bytes.Buffer
		if err := Export(ctx, func(yield func(store.Receipt, error) bool) {
			yield(store.Receipt{Seq: r.Seq, ID: r.ID, Hash: r.Hash, PrevHash: r.PrevHash, JWS: r.JWS}, nil)
		}, &buf); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(buf.String())
	}()
	t.Run("T11 forked chain: two receipts on the same prev", func(t *testing.T) {
		forked := append(append(append([]string{}, lines[:10]...), fork), lines[10:]...)
		wantProblem(t, verifyLines(t, forked, VerifyOptions{}), 10, "", "seq 10 comes after seq 10")
	})
	t.Run("T11 forked chain: the other branch", func(t *testing.T) {
		wantProblem(t, verifyLines(t, edited(9, fork), VerifyOptions{}), 11, rows[10].ID, "prev does not match the hash of receipt 10")
	})
	t.Run("broken line", func(t *testing.T) {
		wantProblem(t, verifyLines(t, edited(12, `{"seq": 13,`), VerifyOptions{}), 0, "", "line 13")
	})
}

// TestForgedExport: an export line edited so that Go reads it otherwise than jq, Python or a
// person is refused, naming the line and the receipt (T12).
func TestForgedExport(t *testing.T) {
	// Edits that Go's decoding would not see: it keeps the last of repeated members, matches
	// names without case and drops unknown ones; jq, Python or a person read them otherwise.
	e := newEnv(t)
	e.run(0, 12, 1)
	r10 := e.rows()[9]
	lines := exportLines(t, e.l.Source(context.Background(), store.ReceiptFilter{}))
	forged := func(old, new string) []string {
		out := append([]string{}, lines...)
		out[9] = editLine(t, lines[9], old, new)
		return out
	}
	for _, c := range []struct {
		name  string
		lines []string
		why   string
	}{
		{"T12 forged export: the status shown failed, then STATUS completed",
			forged(`"status":"completed",`, `"status":"failed","STATUS":"completed",`), `member "STATUS" is not one of`},
		{"T12 forged export: a case variant Go reads as the name (ſ for s)",
			forged(`"status":"completed",`, `"status":"failed","ſtatus":"completed",`), `member "ſtatus" is not one of`},
		{"T12 forged export: a claim the receipt does not have",
			forged(`"status":"completed",`, `"status":"completed","refunded":true,`), `member "refunded" is not one of`},
		{"T12 forged export: a member of the line repeated in another case",
			forged(`"hash":"`, `"HASH":"`+strings.Repeat("0", 64)+`","hash":"`), `member "HASH" is not one of`},
		{"T12 forged export: only white space changed",
			forged(`{"seq":10,`, `{"seq": 10,`), "not byte for byte the line `aether receipts export` writes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := verifyLines(t, c.lines, VerifyOptions{})
			wantProblem(t, rep, 10, r10.ID, "line 10: ")
			wantProblem(t, rep, 10, r10.ID, c.why)
		})
	}
}
