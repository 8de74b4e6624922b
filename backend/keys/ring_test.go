package keys

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestRotate(t *testing.T) {
	dir := t.TempDir()
	r0, err := LoadRing(dir)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := r0.Current.Sign("pact-test+jwt", jwt.MapClaims{"n": 1})
	oldKID, newKID, err := Rotate(dir, time.Now(), 7)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := LoadRing(dir)
	if err != nil {
		t.Fatal(err)
	}
	if oldKID != r0.Current.ID() || newKID != r1.Current.ID() || oldKID == newKID {
		t.Fatalf("rotation %s → %s, ring now %s", oldKID, newKID, r1.Current.ID())
	}
	t.Run("T10 key rotated: old signatures verify with the archived key", func(t *testing.T) {
		if err := r1.Set().Verify(before, "pact-test+jwt", &jwt.MapClaims{}); err != nil {
			t.Fatalf("a signature from before the rotation: %v", err)
		}
		if h, err := r1.VerifyRotations(dir); err != nil || len(h.Retired) != 1 {
			t.Fatalf("rotation statements: %+v %v", h, err)
		}
		Rotate(dir, time.Now(), 9)
		r2, _ := LoadRing(dir)
		if h, err := r2.VerifyRotations(dir); err != nil || len(h.Retired) != 2 || len(h.Set) != 3 {
			t.Fatalf("after a second rotation: %+v %v", h, err)
		}
	})
	t.Run("T10 a rotation statement not signed by the retired key is refused", func(t *testing.T) {
		path := filepath.Join(dir, fileRotations)
		data, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		// A statement signed by the current key instead, claiming to retire the first key.
		r, _ := LoadRing(dir)
		forged, _ := r.Current.Sign(RotationType, rotationClaims{Old: oldKID, New: newKID,
			RegisteredClaims: jwt.RegisteredClaims{IssuedAt: jwt.NewNumericDate(time.Now())}})
		lines[0] = forged
		os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
		if _, err := r.VerifyRotations(dir); err == nil {
			t.Fatal("a forged rotation statement verified")
		}
	})
}

// The statement bounds the key it retires, in the data dir and in the JWKS the node serves.
func TestRotationBounds(t *testing.T) {
	_, r0, r1, h, at := rotatedAt41(t)
	old := r0.Current.ID()
	if rot := h.Retired[old]; !rot.HasSeq || rot.LastSeq != 41 || !rot.At.Equal(at) || rot.New != r1.Current.ID() {
		t.Fatalf("rotation read as %+v", rot)
	}
	doc, _ := json.Marshal(h.JWKS())
	served, err := ParseHistory(doc)
	if err != nil {
		t.Fatal(err)
	}
	for name, hist := range map[string]History{"data dir": h, "JWKS": served} {
		t.Run("T13 a retired key bounded by its statement, read from the "+name, func(t *testing.T) {
			if err := hist.CheckSigned(old, 41, at); err != nil {
				t.Errorf("the old key's last receipt: %v", err)
			}
			if err := hist.CheckSigned(old, 42, at); err == nil || !strings.Contains(err.Error(), "seq 42 is after the rotation") {
				t.Errorf("the old key numbering after its rotation: %v", err)
			}
			if err := hist.CheckSigned(old, 3, at.Add(time.Second)); err == nil || !strings.Contains(err.Error(), "which a rotation retired at") {
				t.Errorf("the old key dated after its rotation: %v", err)
			}
			if err := hist.CheckSigned(old, 3, time.Time{}); err == nil {
				t.Error("the old key without a signing time passed")
			}
			if err := hist.CheckSigned(r1.Current.ID(), 1000, at.Add(time.Hour)); err != nil {
				t.Errorf("the current key: %v", err)
			}
			if s := hist.Successors(old); len(s) != 1 || s[0] != r1.Current.ID() {
				t.Errorf("successors %v", s)
			}
		})
	}
}

// Statements other than those Rotate writes: version 1, from before last_seq; broken ones.
func TestRotationStatementVersions(t *testing.T) {
	dir, r0, r1, h, at := rotatedAt41(t)
	old := r0.Current.ID()
	t.Run("T13 a version 1 statement bounds by time only", func(t *testing.T) {
		v1, _ := r0.Current.Sign(RotationType, rotationClaims{Old: old, New: r1.Current.ID(), NewJWK: r1.Current.Set().JWKS().Keys[0],
			RegisteredClaims: jwt.RegisteredClaims{IssuedAt: jwt.NewNumericDate(at)}})
		os.WriteFile(filepath.Join(dir, fileRotations), []byte(v1+"\n"), 0o600)
		h, err := r1.VerifyRotations(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.CheckSigned(old, 1000, at); err != nil {
			t.Errorf("a version 1 statement bounded by seq: %v", err)
		}
		if err := h.CheckSigned(old, 1000, at.Add(time.Second)); err == nil {
			t.Error("a version 1 statement did not bound by time")
		}
	})
	t.Run("T13 a statement of an unknown version, or one without iat, is refused", func(t *testing.T) {
		seq := int64(1)
		for _, c := range []rotationClaims{
			{V: 3, LastSeq: &seq, RegisteredClaims: jwt.RegisteredClaims{IssuedAt: jwt.NewNumericDate(at)}},
			{V: 0, LastSeq: &seq, RegisteredClaims: jwt.RegisteredClaims{IssuedAt: jwt.NewNumericDate(at)}},
			{V: rotationVersion, LastSeq: &seq},
		} {
			c.Old, c.New, c.NewJWK = old, r1.Current.ID(), r1.Current.Set().JWKS().Keys[0]
			st, _ := r0.Current.Sign(RotationType, c)
			os.WriteFile(filepath.Join(dir, fileRotations), []byte(st+"\n"), 0o600)
			if _, err := r1.VerifyRotations(dir); err == nil {
				t.Errorf("statement %+v accepted", c)
			}
		}
	})
	t.Run("T13 a JWKS whose statement retires another key is refused", func(t *testing.T) {
		bad := h.JWKS()
		for i := range bad.Keys {
			bad.Keys[i].Rotation = h.Retired[old].JWS // the current key too
		}
		doc, _ := json.Marshal(bad)
		if _, err := ParseHistory(doc); err == nil || !strings.Contains(err.Error(), "not this key") {
			t.Fatalf("got %v", err)
		}
	})
}

// rotatedAt41 is a data dir whose first key was rotated once, its last receipt numbered 41:
// the rings before and after, the history read back, and the rotation's time.
func rotatedAt41(t *testing.T) (dir string, r0, r1 *Ring, h History, at time.Time) {
	t.Helper()
	dir = t.TempDir()
	r0, _ = LoadRing(dir)
	at = time.Now().Truncate(time.Second)
	if _, _, err := Rotate(dir, at, 41); err != nil {
		t.Fatal(err)
	}
	r1, _ = LoadRing(dir)
	h, err := r1.VerifyRotations(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, r0, r1, h, at
}
