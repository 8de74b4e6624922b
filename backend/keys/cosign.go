package keys

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// Witness cosignatures of the receipts log's checkpoints: C2SP tlog-cosignature, an Ed25519
// signature (key type 0x04) over "cosignature/v1\ntime <t>\n" and the checkpoint body, the
// signature bytes being the 8-byte big-endian time then the 64-byte signature
// (docs/wire.md, "Witnesses").

const cosigType = 0x04

func cosigKeyHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{cosigType})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil)[:4])
}

func cosigMessage(t uint64, msg []byte) []byte {
	return append([]byte("cosignature/v1\ntime "+strconv.FormatUint(t, 10)+"\n"), msg...)
}

// Cosigner cosigns checkpoints as the witness name with key, at the time now gives.
type Cosigner struct {
	name string
	priv ed25519.PrivateKey
	now  func() time.Time
}

// NewCosigner is a witness named name (a signed-note key name) signing with priv.
func NewCosigner(name string, priv ed25519.PrivateKey, now func() time.Time) *Cosigner {
	return &Cosigner{name: name, priv: priv, now: now}
}

func (c *Cosigner) Name() string    { return c.name }
func (c *Cosigner) KeyHash() uint32 { return cosigKeyHash(c.name, c.priv.Public().(ed25519.PublicKey)) }
func (c *Cosigner) Sign(msg []byte) ([]byte, error) {
	t := uint64(c.now().Unix())
	out := binary.BigEndian.AppendUint64(nil, t)
	return append(out, ed25519.Sign(c.priv, cosigMessage(t, msg))...), nil
}

// VerifierKey is the witness's public key as a C2SP vkey: name+hash+base64(0x04 || key).
func (c *Cosigner) VerifierKey() string {
	pub := c.priv.Public().(ed25519.PublicKey)
	return fmt.Sprintf("%s+%08x+%s", c.name, c.KeyHash(), base64.StdEncoding.EncodeToString(append([]byte{cosigType}, pub...)))
}

// CosigVerifier verifies one witness's cosignatures; Time is that of the last one verified.
type CosigVerifier struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
	Time time.Time
}

// MaxCosignerName bounds a witness's key name, in bytes: C2SP key names are short, and a node
// stores the name of each agent's cosignature (docs/threats.md L11).
const MaxCosignerName = 128

// ParseCosigVerifier reads a witness's vkey (VerifierKey); anything but an Ed25519
// cosignature/v1 key whose hash matches, under a name of at most MaxCosignerName bytes, is
// refused.
func ParseCosigVerifier(vkey string) (*CosigVerifier, error) {
	if name, _, _ := strings.Cut(vkey, "+"); len(name) > MaxCosignerName || len(vkey) > len(name)+64 {
		return nil, fmt.Errorf("the witness key's name is over %d bytes, or the key too long", MaxCosignerName)
	}
	name, rest, ok1 := strings.Cut(vkey, "+")
	hash16, key64, ok2 := strings.Cut(rest, "+")
	h, err := strconv.ParseUint(hash16, 16, 32)
	key, kerr := base64.StdEncoding.DecodeString(key64)
	switch {
	case !ok1 || !ok2 || name == "" || len(hash16) != 8 || err != nil || kerr != nil:
		return nil, errors.New("the witness key is not a vkey (name+hash+key)")
	case len(key) != 1+ed25519.PublicKeySize || key[0] != cosigType:
		return nil, errors.New("the witness key is not an Ed25519 cosignature/v1 key (type 0x04)")
	case cosigKeyHash(name, key[1:]) != uint32(h):
		return nil, errors.New("the witness key's hash does not match its name and key")
	}
	return &CosigVerifier{name: name, hash: uint32(h), pub: ed25519.PublicKey(key[1:])}, nil
}

func (v *CosigVerifier) Name() string    { return v.name }
func (v *CosigVerifier) KeyHash() uint32 { return v.hash }
func (v *CosigVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig)
	if t > 1<<62 || !ed25519.Verify(v.pub, cosigMessage(t, msg), sig[8:]) {
		return false
	}
	v.Time = time.Unix(int64(t), 0).UTC()
	return true
}

var _ note.Verifier = (*CosigVerifier)(nil)
var _ note.Signer = (*Cosigner)(nil)

// Cosigner is the key as a witness named name.
func (k *Key) Cosigner(name string, now func() time.Time) *Cosigner {
	return NewCosigner(name, k.priv, now)
}
