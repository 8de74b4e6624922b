// Package receipts builds, chains and verifies the node's turn receipts.
//
// A receipt is a compact JWS (typ "pact-receipt+jwt", alg EdDSA) signed by the
// node key over Claims. Receipts form one chain per node: receipt n carries
// seq n and prev = the hash of receipt n-1, where a receipt's hash is the
// SHA-256 of its compact JWS (the ASCII bytes), written as lowercase hex. The
// first receipt's prev is Genesis(kid of its signing key).
//
// What the chain proves, and what it cannot (docs/threats.md, T1–T11): an edited
// field breaks the signature or disagrees with the signed claims (T1); a
// reordered, removed or forked receipt breaks seq continuity or the prev chain
// (T2, T3, T11); a receipt signed by a key outside the verifier's set fails
// (T7). Cutting the tail leaves a valid shorter chain: only a high-water mark
// kept elsewhere detects it (T4, and T6 for a whole file restored from an older
// backup) — the owner's note of (seq, hash) given to VerifyOptions.Expect
// (`aether receipts verify --expect-seq N --expect-hash H`), a receipt a
// counterparty holds, or a published checkpoint. The mark the store keeps in its
// own meta table catches only a tail deleted while meta was left alone.
package receipts

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/store"
	"github.com/aether/aether/backend/work"
	"github.com/golang-jwt/jwt/v5"
)

// Typ is the JWS typ header of a receipt.
const Typ = "pact-receipt+jwt"

// ReasonNodeStopped is the reason of the failed receipt Recover gives a turn the
// node was running when it stopped.
const ReasonNodeStopped = "the node stopped while the turn was running"

// ReasonUnrecorded begins the reason of the failed receipt Recover gives a turn whose
// receipt the node could not commit while it ran; why follows ("the disk was full
// (SQLITE_FULL)").
const ReasonUnrecorded = "the node could not commit this turn's receipt: "

// timeLayout is RFC 3339 with milliseconds; receipts carry UTC times.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// Turn is one delegated turn as the turn service knows it. Start takes it before any
// work runs; Append takes it again, with the end fields set, when it ends.
type Turn struct {
	ID          string
	TaskID      string
	ContextID   string
	Brand       domain.BrandID
	BrandScope  string
	GrantID     domain.GrantID
	Agent       domain.Agent
	PolicyHash  string
	RequestHash string // HashJSON of the request message
	AnswerHash  string // HashBytes of the answer text
	Status      domain.TurnStatus
	Reason      string
	ExitCode    int
	StartedAt   time.Time
	EndedAt     time.Time // zero: now
	Usage       domain.Usage
	Violation   bool // the agent changed the workspace against its access mode
	// GrantRevokedDuringTurn: the owner revoked the turn's grant before its receipt was
	// committed. The ledger reads it in that commit; a caller may only set it.
	GrantRevokedDuringTurn bool
	// Work is what the turn did (nil: Codex did not start), signed as the claim work.
	Work *work.Work
	// Unstarted: the turn was never recorded (Start), since none of its work started; its
	// receipt's own commit records it (durable.go, step 1). The receipt is the same.
	Unstarted bool
}

// Version is the receipt format the ledger signs: 2 adds v and work (docs/wire.md, "What the
// turn did"). A receipt without v is version 1 and verifies as it always did.
const Version = 2

// Claims is the signed content of a receipt. The JSON names are part of the
// wire contract.
type Claims struct {
	RID          string            `json:"rid"`
	Seq          int64             `json:"seq"`
	Prev         string            `json:"prev"`
	Turn         string            `json:"turn"`
	Task         string            `json:"task"`
	Ctx          string            `json:"ctx"`
	Brand        string            `json:"brand"`
	Scope        string            `json:"scope"`      // the brand's scope
	PactScope    string            `json:"pact_scope"` // always "pact"
	Grant        string            `json:"grant"`
	Agent        domain.Agent      `json:"agent"`
	Req          string            `json:"req"`
	Ans          string            `json:"ans"`
	Policy       string            `json:"policy"`
	Status       domain.TurnStatus `json:"status"`
	Reason       string            `json:"reason"`
	Exit         int               `json:"exit"`
	Started      string            `json:"started"`
	Ended        string            `json:"ended"`
	Usage        domain.Usage      `json:"usage"`
	Violation    bool              `json:"violation"`
	GrantRevoked bool              `json:"grant_revoked"`
	Kid          string            `json:"kid"`
	// V is the format's version: 0 (absent) for version 1, else Version.
	V    int        `json:"v,omitempty"`
	Work *work.Work `json:"work,omitempty"`
	// iss (the node's publicUrl), iat, and jti (= rid).
	jwt.RegisteredClaims
}

// Receipt is a stored receipt with its claims decoded.
type Receipt struct {
	Seq      int64
	ID       string
	Hash     string
	PrevHash string
	JWS      string
	Claims   Claims
	// proof is where the log holds a receipt just signed (or read with withProof).
	proof *LogProof
}

// Proof is the receipt's C2SP tlog-proof in the node's receipts log (docs/wire.md, "The
// receipts log"), for a receipt this ledger has just appended; "" otherwise.
func (r *Receipt) Proof() string {
	if r.proof == nil {
		return ""
	}
	return FormatProof(r.proof)
}

// HashBytes is the lowercase hex SHA-256 of b: receipt hashes, answer hashes.
func HashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// HashJSON hashes the canonical JSON of v: v encoded with encoding/json, then
// re-encoded with object keys sorted at every level, no insignificant white
// space, numbers as written and no HTML escaping. Anyone holding the same
// message as JSON gets the same hash whatever its key order.
func HashJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("hash json: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return "", fmt.Errorf("hash json: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		return "", fmt.Errorf("hash json: %w", err)
	}
	return HashBytes(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// Genesis is the prev hash of a chain's first receipt: HashBytes of
// "aether-receipts-genesis:" followed by the key id that signed it. A chain
// therefore cannot be passed off as starting under another node's key.
func Genesis(kid string) string { return HashBytes([]byte("aether-receipts-genesis:" + kid)) }

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) (time.Time, error) { return time.Parse(timeLayout, s) }

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// decodeClaims reads a JWS payload without checking anything: for showing
// stored receipts, never for trusting them (VerifyOne does that).
func decodeClaims(jws string) (*Claims, error) {
	payload, err := jwsPart(jws, 1)
	if err != nil {
		return nil, err
	}
	var c Claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, fmt.Errorf("receipt claims: %w", err)
	}
	return &c, nil
}

func jwsPart(jws string, i int) ([]byte, error) {
	parts := strings.Split(jws, ".")
	if len(parts) != 3 {
		return nil, errors.New("not a compact JWS")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[i])
	if err != nil {
		return nil, fmt.Errorf("not a compact JWS: %w", err)
	}
	return b, nil
}

func fromRow(r store.Receipt) (*Receipt, error) {
	c, err := decodeClaims(r.JWS)
	if err != nil {
		return nil, fmt.Errorf("receipt %s: %w", r.ID, err)
	}
	return &Receipt{Seq: r.Seq, ID: r.ID, Hash: r.Hash, PrevHash: r.PrevHash, JWS: r.JWS, Claims: *c}, nil
}
