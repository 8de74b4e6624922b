package receipts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/internal/fuzzseed"
	"github.com/aether/aether/backend/jcs"
	"github.com/aether/aether/backend/store"
)

// The fuzz targets of a receipt chain read from an export (docs/threats.md, T1–T11). README.md,
// "Fuzzing", says how to run them.

// fuzzChain signs n receipts as the ledger does, with fixed ids and times, so the chain and the
// seeds made of it are the same on every run.
func fuzzChain(n int) []store.Receipt {
	key := testKey(1)
	rows := make([]store.Receipt, 0, n)
	prev := Genesis(key.ID())
	for i := range n {
		tr := testTurn(i)
		if i == 2 {
			tr.Status, tr.Reason, tr.ExitCode = domain.TurnFailed, "codex exited with code 3", 3
		}
		rid := fmt.Sprintf("r_%024d", i+1)
		started, ended := tr.StartedAt.UTC().Truncate(time.Millisecond), tr.EndedAt.UTC().Truncate(time.Millisecond)
		c := Claims{RID: rid, Seq: int64(i + 1), Prev: prev, Turn: tr.ID, Task: tr.TaskID, Ctx: tr.ContextID,
			Brand: string(tr.Brand), Scope: tr.BrandScope, PactScope: store.PactScope, Grant: string(tr.GrantID), Agent: tr.Agent,
			Req: tr.RequestHash, Ans: tr.AnswerHash, Policy: tr.PolicyHash, Status: tr.Status, Reason: tr.Reason,
			Exit: tr.ExitCode, Started: formatTime(started), Ended: formatTime(ended), Usage: tr.Usage, Kid: key.ID()}
		c.Issuer, c.ID, c.IssuedAt = testIssuer, rid, jwt.NewNumericDate(ended)
		jws, err := key.Sign(Typ, c)
		if err != nil {
			panic(err)
		}
		hash := HashBytes([]byte(jws))
		rows = append(rows, store.Receipt{Seq: c.Seq, ID: rid, TurnID: tr.ID, PrevHash: prev, Hash: hash, TaskID: tr.TaskID,
			ContextID: tr.ContextID, Brand: tr.Brand, Scope: tr.BrandScope, GrantID: tr.GrantID,
			Agent: tr.Agent, Status: tr.Status, Reason: tr.Reason,
			ExitCode: tr.ExitCode, StartedAt: started, EndedAt: ended, JWS: jws})
		prev = hash
	}
	return rows
}

func sliceSource(rows []store.Receipt) Source {
	return func(yield func(store.Receipt, error) bool) {
		for _, r := range rows {
			if !yield(r, nil) {
				return
			}
		}
	}
}

func exportOf(rows []store.Receipt) []string {
	var buf bytes.Buffer
	if err := Export(context.Background(), sliceSource(rows), &buf); err != nil {
		panic(err)
	}
	return strings.SplitAfter(strings.TrimSuffix(buf.String(), "\n"), "\n")
}

func chainSeeds(chain []store.Receipt) []fuzzseed.Seed {
	lines := exportOf(chain)
	join := func(ls ...string) []byte { return []byte(strings.Join(ls, "")) }
	all := join(lines...)
	edit := func(i int, old, new string) []byte {
		ls := append([]string(nil), lines...)
		if !strings.Contains(ls[i], old) {
			panic("chainSeeds: " + old)
		}
		ls[i] = strings.Replace(ls[i], old, new, 1)
		return join(ls...)
	}
	jws := chain[1].JWS
	parts := strings.Split(jws, ".")
	foreign := testKey(2)
	foreignJWS, _ := foreign.Sign(Typ, jwt.MapClaims{"seq": 1})
	s := fuzzseed.S
	return []fuzzseed.Seed{
		s("valid-chain", all, false),
		s("valid-chain-expect-head", all, true),
		s("valid-crlf-and-blank-lines", []byte(strings.ReplaceAll(string(all), "\n", "\r\n\r\n")), true),
		s("valid-prefix", join(lines[:2]...), false),
		s("t1-edited-claims", edit(1, `"brand":"acme"`, `"brand":"evil"`), false),
		s("t1-edited-column", edit(1, `"id":"r_`, `"id":"x_`), false),
		s("t1-edited-signature", edit(1, parts[2], parts[2][:10]+"A"+parts[2][11:]), false),
		s("t1-edited-payload", edit(1, parts[1], parts[1][:20]+"B"+parts[1][21:]), false),
		s("t2-swapped", join(lines[0], lines[2], lines[1], lines[3]), false),
		s("t3-middle-deleted", join(lines[0], lines[2], lines[3]), false),
		s("t4-tail-cut", join(lines[:3]...), true),
		s("t7-foreign-key", edit(0, chain[0].JWS, foreignJWS), false),
		s("t7-alg-none", edit(0, chain[0].JWS, "eyJhbGciOiJub25lIn0."+strings.Split(chain[0].JWS, ".")[1]+"."), false),
		s("t11-fork", join(lines[0], lines[1], lines[1]), false),
		s("duplicate-seq-key", edit(0, `{"seq":1,`, `{"seq":2,"seq":1,`), false),
		s("case-variant-key", edit(0, `{"seq":1,`, `{"Seq":2,"seq":1,`), false),
		s("huge-seq", edit(0, `{"seq":1,`, `{"seq":1e400,`), false),
		s("seq-overflow", edit(0, `{"seq":1,`, `{"seq":9223372036854775808,`), false),
		s("claims-null", edit(0, `"claims":{`, `"claims":null,"x":{`), false),
		s("invalid-utf8", edit(0, `"acme"`, "\"ac\xffme\""), false),
		s("nul", edit(0, `"acme"`, "\"ac\x00me\""), false),
		s("truncated", all[:len(all)/2], false),
		s("deep-nesting", []byte(`{"seq":1,"claims":`+strings.Repeat("[", 200)+strings.Repeat("]", 200)+"}\n"), false),
		s("not-json", []byte("seq=1\n"), false),
		s("t12-status-duplicate", edit(1, `"status":"completed",`, `"status":"failed","STATUS":"completed",`), false),
		s("t12-status-long-s", edit(1, `"status":"completed",`, `"status":"failed","ſtatus":"completed",`), false),
		s("t12-kid-kelvin", edit(1, `"kid":"`, "\"kid\":\"other\",\"\u212aid\":\""), false),
		s("t12-unknown-claim", edit(1, `"status":"completed",`, `"status":"completed","refunded":true,`), false),
		s("t12-line-member-case-variant", edit(1, `"hash":"`, `"HASH":"0","hash":"`), false),
	}
}

// FuzzReceiptsVerify reads a JSON Lines export with ReadJSONL and verifies it against the
// node's key. However the export was edited, the receipts Verify counts as good are the first
// receipts of the chain the node signed, exactly, and their lines say what the node's export
// says, to any reader (T12: the same canonical JSON); with the head expected, an OK report is
// the whole chain. An export it cannot read is an error only for a line over the 1 MiB cap.
func FuzzReceiptsVerify(f *testing.F) {
	chain := fuzzChain(4)
	fuzzseed.Write(f, chainSeeds(chain))
	set := only(testKey(1).Set())
	head := &store.Checkpoint{Seq: chain[len(chain)-1].Seq, Hash: chain[len(chain)-1].Hash}
	if rep, err := Verify(context.Background(), sliceSource(chain), set, VerifyOptions{Issuer: testIssuer, Expect: head}); err != nil || !rep.OK {
		f.Fatalf("the fixture chain does not verify: %v %v", err, rep.Problem)
	}
	var exported [][]byte
	for _, l := range exportOf(chain) {
		c, err := jcs.Canonicalize([]byte(l))
		if err != nil {
			f.Fatal(err)
		}
		exported = append(exported, c)
	}
	f.Fuzz(func(t *testing.T, data []byte, expectHead bool) {
		opts := VerifyOptions{Issuer: testIssuer}
		if expectHead {
			opts.Expect = head
		}
		var seen []store.Receipt
		src := ReadJSONL(bytes.NewReader(data))
		watched := func(yield func(store.Receipt, error) bool) {
			for r, err := range src {
				if err == nil {
					seen = append(seen, r)
				}
				if !yield(r, err) {
					return
				}
			}
		}
		rep, err := Verify(context.Background(), watched, set, opts)
		if err != nil {
			if !errors.Is(err, bufio.ErrTooLong) {
				t.Fatalf("Verify failed to read the export: %v", err)
			}
			return
		}
		if rep.OK != (rep.Problem == nil) {
			t.Fatalf("report OK %v with problem %v", rep.OK, rep.Problem)
		}
		if rep.Count > len(chain) || rep.Count > len(seen) {
			t.Fatalf("%d receipts verified, of %d read and %d signed", rep.Count, len(seen), len(chain))
		}
		read := nonBlankLines(data)
		for i := range rep.Count {
			if d := receiptDiff(seen[i], chain[i]); d != "" {
				t.Fatalf("receipt %d verified, but it is not the one the node signed: %s", i+1, d)
			}
			if got, err := jcs.Canonicalize(read[i]); err != nil || !bytes.Equal(got, exported[i]) {
				t.Fatalf("receipt %d verified, but its line does not say what the export does:\n %s\n %s", i+1, read[i], exported[i])
			}
		}
		if rep.Count > 0 && (rep.LastSeq != chain[rep.Count-1].Seq || rep.LastHash != chain[rep.Count-1].Hash) {
			t.Fatalf("report ends at %d %s, the chain's receipt %d is %s", rep.LastSeq, rep.LastHash, rep.Count, chain[rep.Count-1].Hash)
		}
		if rep.OK && rep.Count != len(seen) {
			t.Fatalf("OK with %d of %d receipts read verified", rep.Count, len(seen))
		}
		if rep.OK && expectHead && rep.Count != len(chain) {
			t.Fatalf("OK against the expected head with %d of %d receipts", rep.Count, len(chain))
		}
	})
}

// nonBlankLines are the lines ReadJSONL reads receipts from, in order.
func nonBlankLines(data []byte) [][]byte {
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxExportLine)
	for sc.Scan() {
		if b := bytes.TrimSpace(sc.Bytes()); len(b) > 0 {
			out = append(out, append([]byte(nil), b...))
		}
	}
	return out
}

// receiptDiff names the first field where a and b differ ("" when none).
func receiptDiff(a, b store.Receipt) string {
	for _, f := range []struct {
		name string
		a, b any
	}{
		{"seq", a.Seq, b.Seq}, {"id", a.ID, b.ID}, {"turn_id", a.TurnID, b.TurnID}, {"prev_hash", a.PrevHash, b.PrevHash},
		{"hash", a.Hash, b.Hash}, {"task_id", a.TaskID, b.TaskID}, {"context_id", a.ContextID, b.ContextID},
		{"brand", a.Brand, b.Brand}, {"scope", a.Scope, b.Scope}, {"grant_id", a.GrantID, b.GrantID},
		{"agent_iss", a.Agent.Issuer, b.Agent.Issuer}, {"agent_sub", a.Agent.Subject, b.Agent.Subject}, {"status", a.Status, b.Status},
		{"reason", a.Reason, b.Reason}, {"exit_code", a.ExitCode, b.ExitCode},
		{"started_at", a.StartedAt.UnixNano(), b.StartedAt.UnixNano()}, {"ended_at", a.EndedAt.UnixNano(), b.EndedAt.UnixNano()},
		{"jws", a.JWS, b.JWS},
	} {
		if f.a != f.b {
			return fmt.Sprintf("%s %v, signed %v", f.name, f.a, f.b)
		}
	}
	return ""
}

// FuzzReceiptsExport exports one stored row, however damaged, and reads it back: the export is
// one line of JSON, and ReadJSONL gives back that row's seq, id, hash, prev and JWS, or a
// Problem that names it (a damaged row is exported as it is, for the audit to see).
func FuzzReceiptsExport(f *testing.F) {
	chain := fuzzChain(2)
	s := fuzzseed.S
	r := chain[1]
	fuzzseed.Write(f, []fuzzseed.Seed{
		s("valid-row", r.JWS, r.Seq, r.ID, r.Hash, r.PrevHash),
		s("jws-payload-not-json", "eyJhbGciOiJFZERTQSJ9.bm90IGpzb24.c2ln", int64(1), "r_1", "h", "p"),
		s("jws-payload-wrong-types", "eyJhbGciOiJFZERTQSJ9.eyJzZXEiOiJvbmUifQ.c2ln", int64(1), "r_1", "h", "p"),
		s("jws-two-parts", "a.b", int64(-1), "", "", ""),
		s("jws-html-and-nul", "<script>\x00</script>", int64(9223372036854775807), "r_\u2028", "h", "p"),
		s("invalid-utf8", "a.\xff.c", int64(1), "\xfe", "h", "p"),
	})
	f.Fuzz(func(t *testing.T, jws string, seq int64, id, hash, prev string) {
		row := store.Receipt{Seq: seq, ID: id, Hash: hash, PrevHash: prev, JWS: jws}
		var buf bytes.Buffer
		if err := Export(context.Background(), sliceSource([]store.Receipt{row}), &buf); err != nil {
			t.Fatalf("Export: %v", err)
		}
		out := buf.Bytes()
		if bytes.Count(out, []byte("\n")) != 1 || !bytes.HasSuffix(out, []byte("\n")) || !json.Valid(out) {
			t.Fatalf("export is not one line of JSON: %q", out)
		}
		n := 0
		for got, err := range ReadJSONL(bytes.NewReader(out)) {
			n++
			if err != nil {
				var p *Problem
				if !errors.As(err, &p) || p.Seq != seq || utf8.ValidString(id) && p.ID != id {
					t.Fatalf("reading the export back: %v", err)
				}
				continue
			}
			valid := utf8.ValidString(jws) && utf8.ValidString(id) && utf8.ValidString(hash) && utf8.ValidString(prev)
			if valid && (got.Seq != seq || got.ID != id || got.Hash != hash || got.PrevHash != prev || got.JWS != jws) {
				t.Fatalf("read back %+v, exported %+v", got, row)
			}
		}
		if n != 1 {
			t.Fatalf("read back %d rows from one line", n)
		}
	})
}
