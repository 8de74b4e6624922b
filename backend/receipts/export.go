package receipts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"

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
}

// Export writes src as JSON Lines, one receipt per line:
// {"seq", "id", "hash", "prev", "jws", "claims"} where claims is the decoded
// JWS payload. It streams; nothing is checked (Verify does that, and verifies
// an export read back with ReadJSONL).
func Export(ctx context.Context, src Source, w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for r, err := range src {
		if err != nil {
			return fmt.Errorf("export receipts: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		line := exportLine{Seq: r.Seq, ID: r.ID, Hash: r.Hash, Prev: r.PrevHash, JWS: r.JWS, Claims: json.RawMessage("null")}
		// A damaged row is still exported as it is: the audit should see it.
		if payload, err := jwsPart(r.JWS, 1); err == nil && json.Valid(payload) {
			line.Claims = payload
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

// maxExportLine bounds one line of an export (a receipt is a few KB).
const maxExportLine = 1 << 20

// ReadJSONL reads an export back as a Source, for Verify. The columns of each
// receipt come from its line (seq, id, hash, prev) and the claims shown on it; a
// line whose shown claims differ from its JWS payload is reported as a Problem,
// so an edit anywhere in the file is caught.
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

func readLine(n int, b []byte) (store.Receipt, error) {
	var l exportLine
	if err := json.Unmarshal(b, &l); err != nil {
		return store.Receipt{}, &Problem{Reason: fmt.Sprintf("line %d is not a receipt: %v", n, err)}
	}
	var shown Claims
	if err := json.Unmarshal(l.Claims, &shown); err != nil {
		return store.Receipt{}, &Problem{Seq: l.Seq, ID: l.ID, Reason: fmt.Sprintf("line %d: claims: %v", n, err)}
	}
	// An unreadable JWS is left to the signature check.
	if signed, err := decodeClaims(l.JWS); err == nil && !reflect.DeepEqual(shown, *signed) {
		return store.Receipt{}, &Problem{Seq: l.Seq, ID: l.ID, Reason: fmt.Sprintf("line %d: the claims shown differ from the signed claims", n)}
	}
	started, _ := parseTime(shown.Started)
	ended, _ := parseTime(shown.Ended)
	return store.Receipt{Seq: l.Seq, ID: l.ID, TurnID: shown.Turn, PrevHash: l.Prev, Hash: l.Hash,
		TaskID: shown.Task, ContextID: shown.Ctx, Brand: shown.Brand, Scope: shown.Scope, GrantID: shown.Grant,
		AgentIss: shown.Agent.Issuer, AgentSub: shown.Agent.Subject, Status: shown.Status, Reason: shown.Reason,
		ExitCode: shown.Exit, StartedAt: started, EndedAt: ended, JWS: l.JWS}, nil
}
