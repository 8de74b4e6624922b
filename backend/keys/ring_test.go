package keys

import (
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
	oldKID, newKID, err := Rotate(dir, time.Now())
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
		if n, err := r1.VerifyRotations(dir); err != nil || n != 1 {
			t.Fatalf("rotation statements: %d %v", n, err)
		}
		Rotate(dir, time.Now())
		r2, _ := LoadRing(dir)
		if n, err := r2.VerifyRotations(dir); err != nil || n != 2 || len(r2.Set()) != 3 {
			t.Fatalf("after a second rotation: %d %v, %d keys", n, err, len(r2.Set()))
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
