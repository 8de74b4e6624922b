package receipts

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/aether/aether/backend/keys"
)

// The receipts log (docs/wire.md, "The receipts log"): the store keeps the tree; the ledger
// signs its checkpoints with the node key, named by the log's origin, and hands each receipt
// its proof as a C2SP tlog-proof.

// ProofHeader is the first line of a C2SP tlog-proof.
const ProofHeader = "c2sp.org/tlog-proof@v1"

// Origin is the ledger's log origin for a log that has none yet: the node's publicUrl without
// its scheme, "/log" (the log's prefix, as C2SP tlog-tiles recommends) and MovedSuffix. The
// store keeps the origin of the first checkpoint, so a later publicUrl does not make it
// another log.
func (l *Ledger) Origin() string { return OriginOf(*l.issuer.Load()) }

// MovedSuffix ends the origin of a log whose leaves are commitments (LeafData). A log
// of the node key whose origin lacks it was made before, its leaves the receipts' JWS; it
// moved to the origin with the suffix (store migration 7, docs/wire.md "The receipts log").
const MovedSuffix = "/v2"

// MaxLogSize bounds the tree size of a checkpoint and the index of a proof anyone reads:
// golang.org/x/mod/sumdb/tlog loops for ever on trees of 2^62 leaves and more (threats.md L9),
// and no node signs a trillion receipts.
const MaxLogSize = 1 << 40

// MaxOrigin bounds a checkpoint's origin, in bytes.
const MaxOrigin = 256

// MaxCheckpointNote bounds a signed checkpoint anyone reads (the node's carries one signature
// a key), and MaxProof a tlog-proof: what a hostile node hands an agent is bounded before it
// is read, and never kept whole (NodeSigned).
const (
	MaxCheckpointNote = 1 << 14
	MaxProof          = 1 << 15
)

// IsCommitmentLog reports whether the log of origin has commitments as its leaves.
func IsCommitmentLog(origin string) bool { return strings.HasSuffix(origin, MovedSuffix) }

// MovedFrom is the origin of the log made before commitments that the log of origin
// continues ("" for an origin of such a log).
func MovedFrom(origin string) string {
	if !IsCommitmentLog(origin) {
		return ""
	}
	return strings.TrimSuffix(origin, MovedSuffix)
}

// LeafHash is the record hash of the receipt jws in the log of origin: of its commitment,
// or, in a log made before them, of the JWS itself.
func LeafHash(origin, jws string) tlog.Hash {
	if IsCommitmentLog(origin) {
		return tlog.RecordHash(LeafData(jws))
	}
	return tlog.RecordHash([]byte(jws))
}

// OriginOf is the log origin of a node at publicURL.
func OriginOf(publicURL string) string {
	s := publicURL
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	s = strings.TrimRight(s, "/")
	if s == "" {
		s = "aether"
	}
	return s + "/log" + MovedSuffix
}

// Sign signs a checkpoint's text as a signed note with the node key, under the checkpoint's
// own origin (its first line).
func (l *Ledger) Sign(text []byte) ([]byte, error) {
	origin, _, _ := bytes.Cut(text, []byte("\n"))
	return note.Sign(&note.Note{Text: string(text)}, l.key.NoteSigner(string(origin)))
}

// Checkpoint is a checkpoint's body as C2SP tlog-checkpoint writes it.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
}

// ParseCheckpoint reads a checkpoint's text (the note's body): its origin, size and root; it
// refuses anything else, extension lines included (the node writes none).
func ParseCheckpoint(text string) (Checkpoint, error) {
	lines := strings.Split(text, "\n")
	if len(lines) != 4 || lines[3] != "" || lines[0] == "" {
		return Checkpoint{}, errors.New("a checkpoint is three lines: origin, size, root hash")
	}
	if len(lines[0]) > MaxOrigin {
		return Checkpoint{}, fmt.Errorf("checkpoint origin is %d bytes, over %d", len(lines[0]), MaxOrigin)
	}
	size, err := parseBounded(lines[1])
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint size: %w", err)
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return Checkpoint{}, fmt.Errorf("checkpoint root %q is not a base64 SHA-256 hash", lines[2])
	}
	return Checkpoint{Origin: lines[0], Size: size, Root: tlog.Hash(root)}, nil
}

// OpenCheckpoint checks a signed checkpoint against the node keys (under the name of its own
// origin) and reads it. origin, when set, is the origin it must name.
func OpenCheckpoint(signed []byte, set keys.Set, origin string) (Checkpoint, error) {
	if len(signed) > MaxCheckpointNote {
		return Checkpoint{}, fmt.Errorf("the checkpoint is %d bytes, over %d", len(signed), MaxCheckpointNote)
	}
	first, _, _ := bytes.Cut(signed, []byte("\n"))
	if origin != "" && string(first) != origin {
		return Checkpoint{}, fmt.Errorf("the checkpoint is of log %q, not %q", first, origin)
	}
	n, err := openNote(signed, set, string(first))
	if err != nil {
		return Checkpoint{}, err
	}
	return ParseCheckpoint(n.Text)
}

func openNote(signed []byte, set keys.Set, name string) (*note.Note, error) {
	vs, err := set.NoteVerifiers(name)
	if err != nil {
		return nil, err
	}
	n, err := note.Open(signed, vs)
	if err != nil {
		return nil, fmt.Errorf("the checkpoint is not signed by the node key: %w", err)
	}
	return n, nil
}

// NodeSigned is signed, a checkpoint OpenCheckpoint accepts, with only the signatures of the
// node keys set holds (whatever else it carried dropped), and the ids of those keys: what an
// agent keeps of it.
func NodeSigned(signed []byte, set keys.Set) (kept []byte, kids []string, err error) {
	first, _, _ := bytes.Cut(signed, []byte("\n"))
	n, err := openNote(signed, set, string(first))
	if err != nil {
		return nil, nil, err
	}
	b := []byte(n.Text + "\n")
	for _, sig := range n.Sigs {
		b = append(b, "— "+sig.Name+" "+sig.Base64+"\n"...)
		if kid := set.NoteKid(sig.Name, sig.Hash); !slices.Contains(kids, kid) {
			kids = append(kids, kid)
		}
	}
	return b, kids, nil
}

// OpenCheckpointOf is OpenCheckpoint against the node's key history: a checkpoint signed only
// by a retired key must be of a log no larger than the last receipt that key signed, as its
// rotation statement says (docs/threats.md T13): whoever kept the old key cannot extend the log.
func OpenCheckpointOf(signed []byte, h keys.History, origin string) (Checkpoint, error) {
	cp, err := OpenCheckpoint(signed, h.Set, origin)
	if err != nil {
		return cp, err
	}
	n, _ := openNote(signed, h.Set, cp.Origin)
	var why error
	for _, sig := range n.Sigs {
		kid := h.Set.NoteKid(sig.Name, sig.Hash)
		r, retired := h.Retired[kid]
		switch {
		case !retired:
			return cp, nil
		case !r.HasSeq:
			why = fmt.Errorf("the checkpoint of %d receipts is signed by the retired key %s, whose rotation statement gives no last receipt to bound it by", cp.Size, kid)
		case cp.Size > r.LastSeq:
			why = fmt.Errorf("the checkpoint of %d receipts is signed by the key %s, which a rotation retired at seq %d: a retired key signs nothing after its rotation", cp.Size, kid, r.LastSeq)
		default:
			return cp, nil
		}
	}
	return cp, why
}

// parseBounded reads a tree size or leaf index: a decimal number below MaxLogSize.
func parseBounded(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange), err == nil && (n < 0 || strconv.FormatInt(n, 10) != s):
		return 0, fmt.Errorf("%q is not a decimal number", s)
	case err != nil || n >= MaxLogSize:
		return 0, fmt.Errorf("%.24s is not below %d: no log is that large", s, int64(MaxLogSize))
	}
	return n, nil
}

// FormatProof writes p as a C2SP tlog-proof: the header, the index, the inclusion proof's
// hashes, a blank line and the signed checkpoint.
func FormatProof(p *LogProof) string {
	var b strings.Builder
	b.WriteString(ProofHeader + "\nindex " + strconv.FormatInt(p.Index, 10) + "\n")
	for _, h := range p.Hashes {
		b.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
	}
	b.WriteString("\n")
	b.Write(p.Checkpoint)
	return b.String()
}

// ParseProof reads a C2SP tlog-proof (without extra data: the node writes none).
func ParseProof(text string) (*LogProof, error) {
	if len(text) > MaxProof {
		return nil, fmt.Errorf("tlog-proof: %d bytes, over %d", len(text), MaxProof)
	}
	head, signed, ok := strings.Cut(text, "\n\n")
	if !ok {
		return nil, errors.New("tlog-proof: no blank line before the checkpoint")
	}
	lines := strings.Split(head, "\n")
	if len(lines) < 2 || lines[0] != ProofHeader || !strings.HasPrefix(lines[1], "index ") {
		return nil, errors.New("tlog-proof: not a " + ProofHeader + " with an index line")
	}
	n, err := parseBounded(strings.TrimPrefix(lines[1], "index "))
	if err != nil {
		return nil, fmt.Errorf("tlog-proof: index: %w", err)
	}
	p := &LogProof{Index: n, Checkpoint: []byte(signed)}
	for i, l := range lines[2:] {
		h, err := base64.StdEncoding.DecodeString(l)
		if err != nil || len(h) != tlog.HashSize || base64.StdEncoding.EncodeToString(h) != l {
			return nil, fmt.Errorf("tlog-proof: hash line %d is not a base64 SHA-256 hash", i+1)
		}
		p.Hashes = append(p.Hashes, tlog.Hash(h))
	}
	return p, nil
}

// VerifyProof checks that proof puts the receipt jws, with seq seq, in a checkpoint the node
// keys signed, and returns that checkpoint (T15).
func VerifyProof(proof, jws string, seq int64, set keys.Set) (Checkpoint, error) {
	p, err := ParseProof(proof)
	if err != nil {
		return Checkpoint{}, err
	}
	if p.Index != seq-1 {
		return Checkpoint{}, fmt.Errorf("tlog-proof: index %d is not that of receipt %d (%d)", p.Index, seq, seq-1)
	}
	cp, err := OpenCheckpoint(p.Checkpoint, set, "")
	if err != nil {
		return Checkpoint{}, err
	}
	if err := checkInclusion(p, cp, jws); err != nil {
		return Checkpoint{}, fmt.Errorf("tlog-proof: receipt %d is not in the log of size %d the checkpoint signs: %w", seq, cp.Size, err)
	}
	return cp, nil
}

// checkInclusion checks p's inclusion proof of the receipt jws in the tree cp signs.
func checkInclusion(p *LogProof, cp Checkpoint, jws string) error {
	if p.Index >= cp.Size {
		return fmt.Errorf("leaf %d is not in a tree of %d", p.Index, cp.Size)
	}
	return tlog.CheckRecord(p.Hashes, cp.Size, cp.Root, p.Index, LeafHash(cp.Origin, jws))
}
