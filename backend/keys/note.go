package keys

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"golang.org/x/mod/sumdb/note"
)

// noteSigner signs C2SP signed notes (the receipts log's checkpoints) with the node key.
type noteSigner struct {
	name string
	hash uint32
	priv ed25519.PrivateKey
}

func (s noteSigner) Name() string                    { return s.name }
func (s noteSigner) KeyHash() uint32                 { return s.hash }
func (s noteSigner) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.priv, msg), nil }

// NoteSigner is the key as a signed-note signer named name (an Ed25519 note key, type 0x01).
func (k *Key) NoteSigner(name string) note.Signer {
	return noteSigner{name: name, hash: noteKeyHash(name, k.Public()), priv: k.priv}
}

// noteKeyHash is the signed-note key id of an Ed25519 key: SHA-256(name, "\n", 0x01, key)[:4].
func noteKeyHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{0x01})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil)[:4])
}

// NoteVerifiers verifies notes signed by any key of s under the name name.
func (s Set) NoteVerifiers(name string) (note.Verifiers, error) {
	var list []note.Verifier
	for kid, pub := range s {
		vkey, err := note.NewEd25519VerifierKey(name, pub)
		if err != nil {
			return nil, fmt.Errorf("note verifier for key %s: %w", kid, err)
		}
		v, err := note.NewVerifier(vkey)
		if err != nil {
			return nil, fmt.Errorf("note verifier for key %s: %w", kid, err)
		}
		list = append(list, v)
	}
	return note.VerifierList(list...), nil
}

// NoteKid is the id of the key of s whose signed-note key hash under name is hash ("" if none).
func (s Set) NoteKid(name string, hash uint32) string {
	for kid, pub := range s {
		if noteKeyHash(name, pub) == hash {
			return kid
		}
	}
	return ""
}
