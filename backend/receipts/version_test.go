package receipts

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/store"
	"github.com/aether/aether/backend/work"
)

// v1Export is an export the code made before receipts had v and work: three receipts of
// testKey(1), written by `Export` of that code (docs/wire.md, "What the turn did").
const v1Export = "testdata/v1-export.jsonl"

// sampleWork is a turn's work as the codex runner gives it.
func sampleWork() *work.Work {
	w := &work.Work{Codex: "0.169.0", Model: "gpt-test", Sandbox: "workspace-write", Confinement: "bubblewrap 0.9.0",
		Before: "sha256:" + HashBytes([]byte("a")), After: "sha256:" + HashBytes([]byte("b"))}
	exit := 0
	w.Commands.Add(work.Command{Line: "/bin/bash -c 'ls'", LineSHA256: HashBytes([]byte("/bin/bash -c 'ls'")), Status: "completed", Exit: &exit, OutputSHA256: HashBytes(nil)})
	size := int64(3)
	w.Files.Add(work.File{Path: "new.txt", Kind: work.Added, Size: &size, SHA256: HashBytes([]byte("hi\n"))})
	return w
}

// TestVersions: receipts the old code signed keep verifying unchanged, alone and with version
// 2 receipts after them in one chain; version 2 carries its work in the signed claims and in
// the data part.
func TestVersions(t *testing.T) {
	old, err := os.ReadFile(v1Export)
	if err != nil {
		t.Fatal(err)
	}
	set := only(testKey(1).Set())
	verifyLines := func(t *testing.T, b []byte, count int) {
		t.Helper()
		rep, err := Verify(context.Background(), ReadJSONL(bytes.NewReader(b)), set, VerifyOptions{Issuer: testIssuer})
		if err != nil {
			t.Fatal(err)
		}
		wantOK(t, rep, count)
	}
	var rows []store.Receipt
	for r, err := range ReadJSONL(bytes.NewReader(old)) {
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	t.Run("version 1 as it was", func(t *testing.T) {
		verifyLines(t, old, 3)
		for _, r := range rows {
			c, err := VerifyOne(r.JWS, set)
			if err != nil || c.V != 0 || c.Work != nil {
				t.Fatalf("receipt %d: %v, v %d, work %v", r.Seq, err, c.V, c.Work)
			}
		}
	})
	t.Run("version 2 continues the chain", func(t *testing.T) {
		l := &Ledger{key: testKey(1), now: func() time.Time { return t0.Add(time.Hour) }}
		l.SetIssuer(testIssuer)
		turns := []Turn{testTurn(3), testTurn(4)}
		turns[0].Work = sampleWork()
		last := rows[len(rows)-1]
		newRows, recs, err := l.sign(turns, store.Checkpoint{Seq: last.Seq, Hash: last.Hash}, func(domain.GrantID) (bool, error) { return false, nil })
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		src := func(yield func(store.Receipt, error) bool) {
			for _, r := range newRows {
				if !yield(r, nil) {
					return
				}
			}
		}
		if err := Export(context.Background(), src, &b); err != nil {
			t.Fatal(err)
		}
		verifyLines(t, append(slices.Clip(old), b.Bytes()...), 5)
		c, err := VerifyOne(recs[0].JWS, set)
		if err != nil || c.V != Version || c.Work == nil || c.Work.Files.Items[0].SHA256 != HashBytes([]byte("hi\n")) {
			t.Fatalf("version 2 receipt: %v %+v", err, c)
		}
		if c, _ := VerifyOne(recs[1].JWS, set); c.V != Version || c.Work != nil {
			t.Fatalf("a turn whose Codex did not start: v %d, work %v", c.V, c.Work)
		}
		part, err := DataPart(recs[0].JWS)
		if err != nil {
			t.Fatal(err)
		}
		cmd := part["work"].(map[string]any)["commands"].(map[string]any)["items"].([]any)[0].(map[string]any)
		if cmd["lineSha256"] != HashBytes([]byte("/bin/bash -c 'ls'")) || cmd["outputSha256"] == nil {
			t.Fatalf("data part's command: %v", cmd)
		}
	})
}

// TestVersionRefused: a receipt whose v or work is not what the node signs does not verify,
// whoever signed it: an unknown version, work in version 1, a list over its bounds or cut
// without its digest, a text with what the node escapes.
func TestVersionRefused(t *testing.T) {
	key := testKey(1)
	set := only(key.Set())
	sign := func(t *testing.T, edit func(*Claims)) string {
		t.Helper()
		tu := testTurn(1)
		c := Claims{RID: "r_x", Seq: 1, Prev: Genesis(key.ID()), Turn: tu.ID, PactScope: store.PactScope,
			Status: tu.Status, Started: formatTime(tu.StartedAt), Ended: formatTime(tu.EndedAt), Kid: key.ID(),
			V: Version, Work: sampleWork()}
		edit(&c)
		jws, err := key.Sign(Typ, c)
		if err != nil {
			t.Fatal(err)
		}
		return jws
	}
	if _, err := VerifyOne(sign(t, func(*Claims) {}), set); err != nil {
		t.Fatalf("a well-formed version 2 receipt: %v", err)
	}
	long := strings.Repeat("a", work.MaxCommandBytes+1)
	for _, c := range []struct {
		name, want string
		edit       func(*Claims)
	}{
		{"version 3", "version 3", func(c *Claims) { c.V = 3 }},
		{"work in version 1", "work in a version 1", func(c *Claims) { c.V = 0 }},
		{"S13 a control character in a command line", "not escaped", func(c *Claims) { c.Work.Commands.Items[0].Line = "ls\x1b[2Jrm -rf" }},
		{"S13 a bidi override in a path", "not escaped", func(c *Claims) { c.Work.Files.Items[0].Path = "a\u202etxt.exe" }},
		{"S13 a command line over its bound", "not escaped and cut", func(c *Claims) { c.Work.Commands.Items[0].Line = long }},
		{"S13 more items than the bound", "at most", func(c *Claims) {
			for range work.MaxEntries {
				c.Work.Files.Items = append(c.Work.Files.Items, c.Work.Files.Items[0])
			}
			c.Work.Files.Count = len(c.Work.Files.Items)
		}},
		{"S13 cut without the digest of all", "digest of all", func(c *Claims) { c.Work.Patches.Count = 40 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := VerifyOne(sign(t, c.edit), set)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestWorkBounded: the largest work a turn can leave (every list past its bound, every text at
// its longest, and of the characters that grow most in JSON) makes a receipt that an export
// line holds and that verifies.
func TestWorkBounded(t *testing.T) {
	w := &work.Work{Codex: "0.169.0"}
	worst := strings.Repeat(`\`, 10_000) // each is `\\` shown, `\\\\` in JSON
	size := int64(1)
	for range work.MaxEntries + 1 {
		exit := 1
		w.Commands.Add(work.Command{Line: work.Text(worst, work.MaxCommandBytes), LineSHA256: HashBytes(nil), Status: "completed", Exit: &exit, OutputSHA256: HashBytes(nil)})
		w.Files.Add(work.File{Path: work.Text(worst, work.MaxPathBytes), Kind: work.Modified, Size: &size, SHA256: HashBytes(nil)})
		w.Patches.Add(work.Patch{Path: work.Text(worst, work.MaxPathBytes), Kind: "update", Status: "completed"})
	}
	l := &Ledger{key: testKey(1), now: func() time.Time { return t0 }}
	l.SetIssuer(testIssuer)
	tu := testTurn(0)
	tu.Work = w
	rows, _, err := l.sign([]Turn{tu}, store.Checkpoint{}, func(domain.GrantID) (bool, error) { return false, nil })
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Export(context.Background(), func(yield func(store.Receipt, error) bool) { yield(rows[0], nil) }, &b); err != nil {
		t.Fatal(err)
	}
	t.Logf("largest receipt: JWS %d bytes, export line %d bytes (at most %d)", len(rows[0].JWS), b.Len(), maxExportLine)
	if b.Len() > maxExportLine/4 {
		t.Fatalf("an export line of %d bytes", b.Len())
	}
	rep, err := Verify(context.Background(), ReadJSONL(&b), only(testKey(1).Set()), VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantOK(t, rep, 1)
}

// A turn whose 32 commands, files and patches are named with <, > and & gets a receipt the node
// keeps: signed without HTML escaping. One whose names JSON doubles (\ and ") gets one too, its
// work cut to fit, each list still saying how many there were and the digest of all
// (docs/threats.md T15).
func TestReceiptTooBigToKeep(t *testing.T) {
	for _, c := range []struct {
		name, chars string
		cut         bool
	}{
		{"T15 32 files and commands named with <>& keep their receipt, whole", "<>&", false},
		{"T15 32 files and commands named with \\ and \" keep their receipt, cut to fit with the count and digest of all", `\"`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			w := &work.Work{Codex: "0.169.0", Sandbox: "workspace-write", Confinement: "bubblewrap 0.9.0"}
			for i := range 32 {
				line := work.Text(fmt.Sprintf("echo %d ", i)+strings.Repeat(c.chars, 200), work.MaxCommandBytes)
				w.Commands.Add(work.Command{Line: line, LineSHA256: HashBytes([]byte(line)), Status: "completed"})
				path := work.Text(fmt.Sprintf("%d-", i)+strings.Repeat(c.chars, 100), work.MaxPathBytes)
				w.Files.Add(work.File{Path: path, Kind: work.Added, SHA256: HashBytes([]byte(path))})
				w.Patches.Add(work.Patch{Path: path, Kind: "add", Status: "completed"})
			}
			tr := testTurn(0)
			ctx := context.Background()
			if err := e.l.Start(ctx, tr); err != nil {
				t.Fatal(err)
			}
			tr.Work = w
			r, err := e.l.Append(ctx, tr)
			if err != nil {
				t.Fatalf("the receipt was not kept: %v", err)
			}
			got, err := VerifyOne(r.JWS, only(e.key.Set()))
			if err != nil || len(r.JWS) > MaxReceipt {
				t.Fatalf("receipt of %d bytes: %v", len(r.JWS), err)
			}
			if payload, _ := jwsPart(r.JWS, 1); c.chars == "<>&" && !bytes.Contains(payload, []byte("<>&")) {
				t.Error("the claims were signed HTML-escaped")
			}
			files := got.Work.Files
			want := w.Files
			if c.cut { // the digest of all 32 files: what Keep(0) of the whole list says
				want.Digest = w.Files.Keep(0).Digest
			}
			if files.Count != 32 || (len(files.Items) < 32) != c.cut || files.Digest != want.Digest || got.Work.Commands.Count != 32 || got.Work.Patches.Count != 32 {
				t.Fatalf("work kept: %d files of %d (digest %q), %d commands, %d patches", len(files.Items), files.Count, files.Digest, got.Work.Commands.Count, got.Work.Patches.Count)
			}
			t.Logf("receipt: %d bytes, %d of 32 items a list", len(r.JWS), len(files.Items))
		})
	}
}
