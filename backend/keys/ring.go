package keys

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aether/aether/backend/fsutil"
	"github.com/golang-jwt/jwt/v5"
)

// Files of a key ring in the data dir.
const (
	fileCurrent   = "node.key"        // the signing key
	fileRetired   = "retired.jwks"    // public halves of the keys it replaced
	fileRotations = "rotations.jsonl" // one statement per rotation, signed by the old key
	// RotationType is the typ of a rotation statement.
	RotationType = "pact-key-rotation+jwt"
)

// Ring is the node's signing key and the keys it used before: receipts signed
// before a rotation keep verifying with the node's JWKS (T10).
type Ring struct {
	Current *Key
	retired Set
}

// HasRing tells whether dir holds a signing key, without creating one.
func HasRing(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, fileCurrent))
	return err == nil
}

// LoadRing reads the ring in dir, creating the signing key on first start.
func LoadRing(dir string) (*Ring, error) {
	cur, err := LoadOrCreate(filepath.Join(dir, fileCurrent))
	if err != nil {
		return nil, err
	}
	retired, err := readRetired(dir)
	if err != nil {
		return nil, err
	}
	return &Ring{Current: cur, retired: retired}, nil
}

// Set verifies everything the node ever signed: the current and retired keys.
func (r *Ring) Set() Set {
	s := Set{}
	for kid, pub := range r.retired {
		s[kid] = pub
	}
	s[r.Current.ID()] = r.Current.Public()
	return s
}

func readRetired(dir string) (Set, error) {
	data, err := os.ReadFile(filepath.Join(dir, fileRetired))
	if errors.Is(err, os.ErrNotExist) {
		return Set{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read retired keys: %w", err)
	}
	s, err := ParseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, fileRetired), err)
	}
	return s, nil
}

// rotationVersion is the version a rotation statement is made in: version 2 carries last_seq,
// a version 1 statement (no "v") does not (docs/wire.md, "Key rotation").
const rotationVersion = 2

// rotationClaims is what a rotation statement says: the old key hands over
// to the new one after the receipt numbered last_seq.
type rotationClaims struct {
	V       int    `json:"v,omitempty"`
	Old     string `json:"old"`
	New     string `json:"new"`
	NewJWK  JWK    `json:"new_jwk"`
	LastSeq *int64 `json:"last_seq,omitempty"`
	jwt.RegisteredClaims
}

// Rotate replaces the signing key in dir with a new one. The old key signs a
// statement naming its successor and lastSeq, the last receipt it signed, so
// that nothing it signs later verifies (T13); the statement is appended to
// rotations.jsonl and the old public half joins retired.jwks before the new key
// is installed, so a crash at any step leaves a ring that loads and verifies.
// The node must not be running.
func Rotate(dir string, now time.Time, lastSeq int64) (oldKID, newKID string, err error) {
	old, err := LoadOrCreate(filepath.Join(dir, fileCurrent))
	if err != nil {
		return "", "", err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generate node key: %w", err)
	}
	next := newKey(priv)
	statement, err := old.Sign(RotationType, rotationClaims{
		V: rotationVersion, Old: old.ID(), New: next.ID(), NewJWK: next.Set().JWKS().Keys[0], LastSeq: &lastSeq,
		RegisteredClaims: jwt.RegisteredClaims{IssuedAt: jwt.NewNumericDate(now)},
	})
	if err != nil {
		return "", "", err
	}
	if err := appendLine(filepath.Join(dir, fileRotations), statement); err != nil {
		return "", "", err
	}
	retired, err := readRetired(dir)
	if err != nil {
		return "", "", err
	}
	retired[old.ID()] = old.Public()
	doc, err := json.MarshalIndent(retired.JWKS(), "", "  ")
	if err != nil {
		return "", "", err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, fileRetired), doc, 0o600); err != nil {
		return "", "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", "", err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, fileCurrent), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return old.ID(), next.ID(), nil
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("record key rotation: %w", err)
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("record key rotation: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("record key rotation: %w", err)
	}
	return f.Close()
}

// VerifyRotations checks the ring's history: every statement is signed by the
// key it retires, names the key that follows, and the last one leads to the
// current key. It returns the history receipts verify with, each retired key
// bounded by its statement (T13).
func (r *Ring) VerifyRotations(dir string) (History, error) {
	h := History{Set: r.Set(), Retired: map[string]Rotation{}}
	data, err := os.ReadFile(filepath.Join(dir, fileRotations))
	if errors.Is(err, os.ErrNotExist) {
		if len(r.retired) > 0 {
			return History{}, errors.New("retired keys but no rotation statements: the ring was edited")
		}
		return h, nil
	}
	if err != nil {
		return History{}, err
	}
	n, prev := 0, ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := string(bytes.TrimSpace(sc.Bytes()))
		if len(line) == 0 {
			continue
		}
		n++
		rot, err := readStatement(h.Set, line)
		if err != nil {
			return History{}, fmt.Errorf("rotation %d: %w", n, err)
		}
		if prev != "" && rot.Old != prev {
			return History{}, fmt.Errorf("rotation %d retires %s, but the key before it was %s", n, rot.Old, prev)
		}
		h.Retired[rot.Old] = rot
		prev = rot.New
	}
	if err := sc.Err(); err != nil {
		return History{}, err
	}
	if prev != "" && prev != r.Current.ID() {
		return History{}, fmt.Errorf("the last rotation hands over to %s, but the node signs with %s", prev, r.Current.ID())
	}
	if len(h.Retired) != len(r.retired) {
		return History{}, fmt.Errorf("%d retired keys but %d rotation statements: the ring was edited", len(r.retired), len(h.Retired))
	}
	return h, nil
}
