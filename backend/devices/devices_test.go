package devices

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func open(t *testing.T) (*Store, *clock, string) {
	t.Helper()
	c := &clock{time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "devices.json")
	s, err := Open(path, c.now)
	if err != nil {
		t.Fatal(err)
	}
	return s, c, path
}

func TestPairing(t *testing.T) {
	t.Run("O1 a pairing link works once", func(t *testing.T) {
		s, _, _ := open(t)
		code, _ := s.NewPairing()
		if _, _, err := s.Pair(code, "nodeA", "pixel"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Pair(code, "nodeB", "thief"); !errors.Is(err, ErrPairing) {
			t.Fatalf("a used pairing code paired again: %v", err)
		}
		if n := len(s.List()); n != 1 {
			t.Fatalf("%d devices, want 1", n)
		}
	})
	t.Run("O1 a pairing link expires after five minutes", func(t *testing.T) {
		s, c, _ := open(t)
		code, exp := s.NewPairing()
		if exp.Sub(c.t) != PairingTTL {
			t.Fatalf("expires in %s", exp.Sub(c.t))
		}
		c.t = exp
		if _, _, err := s.Pair(code, "nodeA", "pixel"); !errors.Is(err, ErrPairing) {
			t.Fatalf("an expired pairing code paired: %v", err)
		}
	})
	t.Run("O1 a guessed code pairs nothing", func(t *testing.T) {
		s, _, _ := open(t)
		s.NewPairing()
		if _, _, err := s.Pair("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "nodeA", "x"); !errors.Is(err, ErrPairing) {
			t.Fatalf("a guessed code paired: %v", err)
		}
	})
}

func TestSessions(t *testing.T) {
	s, c, path := open(t)
	code, _ := s.NewPairing()
	got, secret, err := s.Pair(code, "nodeA", "pixel\x1b[31m")
	if err != nil {
		t.Fatal(err)
	}
	if got.Device.Name != "pixel[31m" || got.CSRF == "" {
		t.Fatalf("paired %+v", got)
	}
	t.Run("the paired device signs in and its use is noted", func(t *testing.T) {
		c.t = c.t.Add(2 * time.Minute)
		x, err := s.Session(secret, "nodeA")
		if err != nil || x.Device.ID != got.Device.ID || x.CSRF != got.CSRF {
			t.Fatalf("session %+v, %v", x, err)
		}
		if l := s.List(); !l[0].LastUsed.Equal(c.t) {
			t.Fatalf("last used %s, want %s", l[0].LastUsed, c.t)
		}
	})
	t.Run("O5 the session cookie replayed from another device is refused", func(t *testing.T) {
		if _, err := s.Session(secret, "nodeB"); !errors.Is(err, ErrOtherDevice) {
			t.Fatalf("another device used the session: %v", err)
		}
	})
	t.Run("the file keeps devices but no secret", func(t *testing.T) {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte(secret)) {
			t.Fatal("devices.json holds the session secret")
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Fatalf("devices.json mode %v", fi.Mode().Perm())
		}
		again, err := Open(path, c.now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := again.Session(secret, "nodeA"); err != nil {
			t.Fatalf("after a restart: %v", err)
		}
	})
	t.Run("O2 a revoked device is refused", func(t *testing.T) {
		if err := s.Revoke(got.Device.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Session(secret, "nodeA"); !errors.Is(err, ErrNoSession) {
			t.Fatalf("a revoked device signed in: %v", err)
		}
		if err := s.Revoke(got.Device.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("revoked twice: %v", err)
		}
	})
	t.Run("A6 a new admin token ends every device and pairing", func(t *testing.T) {
		code, _ := s.NewPairing()
		_, sec, err := s.Pair(code, "nodeC", "ipad")
		if err != nil {
			t.Fatal(err)
		}
		unused, _ := s.NewPairing()
		if err := s.RevokeAll(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Session(sec, "nodeC"); !errors.Is(err, ErrNoSession) {
			t.Fatalf("a device outlived the new token: %v", err)
		}
		if _, _, err := s.Pair(unused, "nodeC", "ipad"); !errors.Is(err, ErrPairing) {
			t.Fatalf("a pairing link outlived the new token: %v", err)
		}
	})
	t.Run("an empty secret is no session", func(t *testing.T) {
		if _, err := s.Session("", "nodeA"); !errors.Is(err, ErrNoSession) {
			t.Fatal(err)
		}
	})
}
