// Package devices is the owner's paired phones: one-time pairing codes, the device sessions a
// pairing starts, and their Web Push subscriptions (push.go). A device session is good only on
// the tailnet, from the device it was paired on (its Tailscale node), until the owner revokes it
// or rotates the admin token (docs/threats.md, O1–O5). It is kept in devices.json in the data
// dir (mode 0600), with only the SHA-256 of each session secret. No HTTP: admin serves it.
package devices

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aether/aether/backend/fsutil"
)

// PairingTTL is how long a pairing link works (once).
const PairingTTL = 5 * time.Minute

const (
	maxDevices  = 16
	maxPairings = 4
	lastUseStep = time.Minute // a use is written to the file at most this often per device
)

// Errors of Pair and Session.
var (
	ErrPairing     = errors.New("this pairing link was already used, has expired or is not valid: add the phone again in the window")
	ErrNoSession   = errors.New("this device is not paired (or was removed): pair it again from the window")
	ErrOtherDevice = errors.New("this device session belongs to another device")
	ErrNotFound    = errors.New("no such device")
	ErrFull        = fmt.Errorf("at most %d devices can be paired: remove one first", maxDevices)
)

// Device is a paired device as the owner sees it.
type Device struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"` // its name on the tailnet when it paired
	Node     string    `json:"node"` // its Tailscale node (stable id): the session is good only from it
	Paired   time.Time `json:"paired"`
	LastUsed time.Time `json:"lastUsed"`
	Push     bool      `json:"push"` // subscribed to Web Push
}

// Session is a signed-in device: who it is and the CSRF token its calls carry.
type Session struct {
	Device Device
	CSRF   string
}

type record struct {
	Device
	SecretHash string        `json:"secretHash"` // hex SHA-256 of the cookie's secret
	CSRF       string        `json:"csrf"`
	Sub        *Subscription `json:"subscription,omitempty"`
	saved      time.Time     // LastUsed as last written
}

type file struct {
	Devices []*record `json:"devices"`
	VAPID   *vapidKey `json:"vapid,omitempty"`
}

// Store is the paired devices of one node.
type Store struct {
	path string
	now  func() time.Time

	mu       sync.Mutex
	f        file
	pairings map[[32]byte]time.Time // SHA-256 of a live pairing code → when it expires
}

// Open reads the devices file at path (none yet: no devices); now nil means time.Now.
func Open(path string, now func() time.Time) (*Store, error) {
	if now == nil {
		now = time.Now
	}
	s := &Store{path: path, now: now, pairings: map[[32]byte]time.Time{}}
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("devices: %w", err)
	default:
		if err := json.Unmarshal(raw, &s.f); err != nil {
			return nil, fmt.Errorf("devices: %s is not valid: %w", path, err)
		}
		for _, r := range s.f.Devices {
			r.saved = r.LastUsed
		}
	}
	return s, nil
}

// NewPairing mints a pairing code: good once, within PairingTTL, for one device. Minting more
// than a few forgets the oldest.
func (s *Store) NewPairing() (code string, expires time.Time) {
	code, now := newSecret(), s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, exp := range s.pairings {
		if !now.Before(exp) {
			delete(s.pairings, h)
		}
	}
	for len(s.pairings) >= maxPairings {
		var oldest [32]byte
		var at time.Time
		for h, exp := range s.pairings {
			if at.IsZero() || exp.Before(at) {
				oldest, at = h, exp
			}
		}
		delete(s.pairings, oldest)
	}
	expires = now.Add(PairingTTL)
	s.pairings[sha256.Sum256([]byte(code))] = expires
	return code, expires
}

// Pair redeems a pairing code for the device node (its stable id on the tailnet) named name,
// and returns the new device's session and the secret its cookie carries. The code is spent
// whatever happens next.
func (s *Store) Pair(code, node, name string) (Session, string, error) {
	if node == "" {
		return Session{}, "", ErrOtherDevice
	}
	now := s.now()
	h := sha256.Sum256([]byte(code))
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.pairings[h]
	delete(s.pairings, h)
	if !ok || !now.Before(exp) {
		return Session{}, "", ErrPairing
	}
	if len(s.f.Devices) >= maxDevices {
		return Session{}, "", ErrFull
	}
	secret := newSecret()
	sum := sha256.Sum256([]byte(secret))
	r := &record{
		Device:     Device{ID: newSecret()[:16], Name: cleanName(name), Node: node, Paired: now, LastUsed: now},
		SecretHash: hex.EncodeToString(sum[:]),
		CSRF:       newSecret(),
		saved:      now,
	}
	s.f.Devices = append(s.f.Devices, r)
	if err := s.saveLocked(); err != nil {
		s.f.Devices = s.f.Devices[:len(s.f.Devices)-1]
		return Session{}, "", err
	}
	return Session{Device: r.Device, CSRF: r.CSRF}, secret, nil
}

// Session is the device whose cookie carries secret, calling from node: ErrNoSession for an
// unknown secret, ErrOtherDevice when another device presents it (O5). It notes the use.
func (s *Store) Session(secret, node string) (Session, error) {
	sum := sha256.Sum256([]byte(secret))
	want := hex.EncodeToString(sum[:])
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.findLocked(func(r *record) bool {
		return subtle.ConstantTimeCompare([]byte(r.SecretHash), []byte(want)) == 1
	})
	if r == nil || secret == "" {
		return Session{}, ErrNoSession
	}
	if node == "" || r.Node != node {
		return Session{}, ErrOtherDevice
	}
	r.LastUsed = now
	if now.Sub(r.saved) >= lastUseStep {
		_ = s.saveLocked() // a use not written is only a less precise "last used"
	}
	return Session{Device: r.Device, CSRF: r.CSRF}, nil
}

// List is the paired devices, the most recently paired first.
func (s *Store) List() []Device {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Device, 0, len(s.f.Devices))
	for _, r := range s.f.Devices {
		d := r.Device
		d.Push = r.Sub != nil
		out = append(out, d)
	}
	slices.Reverse(out)
	return out
}

// Revoke removes the device id: its session ends and it gets no more pushes.
func (s *Store) Revoke(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.f.Devices, func(r *record) bool { return r.ID == id })
	if i < 0 {
		return ErrNotFound
	}
	old := s.f.Devices
	s.f.Devices = slices.Delete(slices.Clone(old), i, i+1)
	if err := s.saveLocked(); err != nil {
		s.f.Devices = old
		return err
	}
	return nil
}

// RevokeAll removes every device and unused pairing code (`aether admin new-token`, A6).
func (s *Store) RevokeAll() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.pairings)
	old := s.f.Devices
	s.f.Devices = nil
	if err := s.saveLocked(); err != nil {
		s.f.Devices = old
		return err
	}
	return nil
}

func (s *Store) findLocked(match func(*record) bool) *record {
	for _, r := range s.f.Devices {
		if match(r) {
			return r
		}
	}
	return nil
}

func (s *Store) saveLocked() error {
	raw, err := json.MarshalIndent(s.f, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(s.path, raw, 0o600); err != nil {
		return fmt.Errorf("devices: %w", err)
	}
	for _, r := range s.f.Devices {
		r.saved = r.LastUsed
	}
	return nil
}

// cleanName keeps a device name short and printable.
func cleanName(name string) string {
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.TrimSpace(name))
	if r := []rune(name); len(r) > 40 {
		name = string(r[:40])
	}
	if name == "" {
		name = "phone"
	}
	return name
}

// newSecret returns 32 random bytes, base64url without padding.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand crashes the program instead)
	return base64.RawURLEncoding.EncodeToString(b)
}
