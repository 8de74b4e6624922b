package receipts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/jcs"
	"github.com/aether/aether/backend/store"
)

// exportLine is one line of a JSON Lines export.
type exportLine struct {
	Seq    int64           `json:"seq"`
	ID     string          `json:"id"`
	Hash   string          `json:"hash"`
	Prev   string          `json:"prev"`
	JWS    string          `json:"jws"`
	Claims json.RawMessage `json:"claims"` // the JWS payload, verbatim (null if it is not JSON)
	// Proof is the receipt's C2SP tlog-proof in the node's receipts log, against the newest
	// checkpoint when the export began (ExportDB); absent from exports without the log.
	Proof string `json:"proof,omitempty"`
}

// Export writes src as JSON Lines, one receipt per line:
// {"seq", "id", "hash", "prev", "jws", "claims"} where claims is the decoded
// JWS payload. It streams; nothing is checked (Verify does that, and verifies
// an export read back with ReadJSONL).
func Export(ctx context.Context, src Source, w io.Writer) error {
	return export(ctx, src, w, nil)
}

// export is Export, each line with the proof prove gives its receipt (nil: none).
func export(ctx context.Context, src Source, w io.Writer, prove func(store.Receipt) (string, error)) error {
	bw := bufio.NewWriter(w)
	enc := lineEncoder(bw)
	for r, err := range src {
		if err != nil {
			return fmt.Errorf("export receipts: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// A damaged row is still exported as it is: the audit should see it.
		line := exportLine{Seq: r.Seq, ID: r.ID, Hash: r.Hash, Prev: r.PrevHash, JWS: r.JWS, Claims: shownClaims(r.JWS)}
		if prove != nil {
			var err error
			if line.Proof, err = prove(r); err != nil {
				return fmt.Errorf("export receipt %d: %w", r.Seq, err)
			}
		}
		if err := enc.Encode(line); err != nil {
			return fmt.Errorf("export receipt %d: %w", r.Seq, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export receipts: %w", err)
	}
	return nil
}

// lineEncoder writes export lines: ReadJSONL checks a line against what it writes.
func lineEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// shownClaims is what an export shows as the claims of a receipt: its JWS payload verbatim
// (compact, as the node signs it), or null when that is not JSON.
func shownClaims(jws string) json.RawMessage {
	payload, err := jwsPart(jws, 1)
	var b bytes.Buffer
	if err != nil || json.Compact(&b, payload) != nil {
		return json.RawMessage("null")
	}
	return b.Bytes()
}

// maxExportLine bounds one line of an export (a receipt is a few KB).
const maxExportLine = 1 << 20

// ReadJSONL reads an export back as a Source, for Verify. The columns of each
// receipt come from its line (seq, id, hash, prev, which Verify checks against
// the signed claims) and from its JWS payload. A line that is not exactly what
// Export writes is reported as a Problem, so an edit anywhere in the file is
// caught (T12): members repeated, in another case (also as encoding/json folds
// it), unknown or missing, and shown claims that are not the JWS payload byte
// for byte, which is what jq, Python or a person reads there.
func ReadJSONL(r io.Reader) Source {
	return func(yield func(store.Receipt, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), maxExportLine)
		n := 0
		for sc.Scan() {
			n++
			b := bytes.TrimSpace(sc.Bytes())
			if len(b) == 0 {
				continue
			}
			row, err := readLine(n, b)
			if !yield(row, err) || err != nil {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(store.Receipt{}, fmt.Errorf("read export line %d: %w", n+1, err))
		}
	}
}

// readLine reads line n, b, which must be byte for byte the line Export writes for the values
// it holds (T12).
func readLine(n int, b []byte) (store.Receipt, error) {
	var l exportLine
	if err := json.Unmarshal(b, &l); err != nil {
		return store.Receipt{}, &Problem{Reason: fmt.Sprintf("line %d is not a receipt: %v", n, err)}
	}
	bad := func(why string) (store.Receipt, error) {
		return store.Receipt{}, &Problem{Seq: l.Seq, ID: l.ID, Reason: fmt.Sprintf("line %d: %s", n, why)}
	}
	var want bytes.Buffer
	exported := l
	exported.Claims = shownClaims(l.JWS)
	if err := lineEncoder(&want).Encode(exported); err != nil || !bytes.Equal(b, bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
		return bad(lineDiffers(b, l))
	}
	// An unreadable payload is left to the signature check.
	var signed Claims
	if c, err := decodeClaims(l.JWS); err == nil {
		signed = *c
	}
	started, _ := parseTime(signed.Started)
	ended, _ := parseTime(signed.Ended)
	if l.Proof != "" {
		if _, err := ParseProof(l.Proof); err != nil {
			return bad(err.Error())
		}
	}
	return store.Receipt{Proof: l.Proof, Seq: l.Seq, ID: l.ID, TurnID: signed.Turn, PrevHash: l.Prev, Hash: l.Hash,
		TaskID: signed.Task, ContextID: signed.Ctx, Brand: domain.BrandID(signed.Brand), Scope: signed.Scope, GrantID: domain.GrantID(signed.Grant),
		Agent: signed.Agent, Status: signed.Status, Reason: signed.Reason,
		ExitCode: signed.Exit, StartedAt: started, EndedAt: ended, JWS: l.JWS}, nil
}

// lineDiffers says how the line b, read as l, differs from the line Export writes for it: a
// member repeated, in another case, unknown or missing (named), claims that are not the JWS
// payload, or only white space, member order or escapes.
func lineDiffers(b []byte, l exportLine) string {
	if err := jcs.Exact(b, &exportLine{}); err != nil {
		return "not a line as `aether receipts export` writes it: " + err.Error()
	}
	if !bytes.Equal(l.Claims, shownClaims(l.JWS)) {
		why := "the claims shown differ from the signed claims: an export shows the JWS payload byte for byte"
		if err := jcs.Exact(l.Claims, &Claims{}); err != nil {
			why += " (" + err.Error() + ")"
		}
		return why
	}
	return "not byte for byte the line `aether receipts export` writes for what it says (white space, member order or escapes changed)"
}
