// Package pushtest is the other end of Web Push for tests: a browser's subscription keys and
// the decryption of what it is sent (RFC 8291 over RFC 8188's aes128gcm), and an RFC 8030
// push service on loopback that keeps every message it takes.
package pushtest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Browser is what a browser keeps of a push subscription: its ECDH key and auth secret.
type Browser struct {
	key  *ecdh.PrivateKey
	auth []byte
}

// NewBrowser makes a browser's subscription keys.
func NewBrowser() *Browser {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	b := &Browser{key: k, auth: make([]byte, 16)}
	_, _ = rand.Read(b.auth)
	return b
}

// P256dh and Auth are the subscription's keys as PushSubscription.toJSON() gives them.
func (b *Browser) P256dh() string {
	return base64.RawURLEncoding.EncodeToString(b.key.PublicKey().Bytes())
}
func (b *Browser) Auth() string { return base64.RawURLEncoding.EncodeToString(b.auth) }

// Decrypt reads an aes128gcm push message (RFC 8188) encrypted for b (RFC 8291 section 3.4).
func (b *Browser) Decrypt(body []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, fmt.Errorf("a %d-byte message has no aes128gcm header", len(body))
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if idlen != 65 || len(body) < 21+idlen {
		return nil, fmt.Errorf("keyid of %d bytes, want the sender's 65-byte public key", idlen)
	}
	senderPub, ct := body[21:21+idlen], body[21+idlen:]
	if uint32(len(ct)) > rs {
		return nil, fmt.Errorf("more than one record (%d bytes, rs %d)", len(ct), rs)
	}
	as, err := ecdh.P256().NewPublicKey(senderPub)
	if err != nil {
		return nil, err
	}
	shared, err := b.key.ECDH(as)
	if err != nil {
		return nil, err
	}
	keyInfo := append(append([]byte("WebPush: info\x00"), b.key.PublicKey().Bytes()...), senderPub...)
	prkKey, err := hkdf.Extract(sha256.New, shared, b.auth)
	if err != nil {
		return nil, err
	}
	ikm, err := hkdf.Expand(sha256.New, prkKey, string(keyInfo), 32)
	if err != nil {
		return nil, err
	}
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	blk, _ := aes.NewCipher(cek)
	gcm, _ := cipher.NewGCM(blk)
	plain, err := gcm.Open(nil, nonce, ct, nil)
	if err != nil {
		return nil, fmt.Errorf("the message does not decrypt with the subscription's keys: %w", err)
	}
	plain = bytes.TrimRight(plain, "\x00")
	if len(plain) == 0 || plain[len(plain)-1] != 2 {
		return nil, errors.New("the last record has no 0x02 delimiter")
	}
	return plain[:len(plain)-1], nil
}

// Message is one message a push service took.
type Message struct {
	Header http.Header
	Body   []byte
	At     time.Time // when it arrived
}

// Service is an RFC 8030 push service on loopback (TLS): it answers every POST with Status
// and hands the message to Messages.
type Service struct {
	*httptest.Server
	Messages chan Message
	mu       sync.Mutex
	status   int
}

// NewService starts a push service; Close it when done.
func NewService() *Service {
	s := &Service{Messages: make(chan Message, 16), status: http.StatusCreated}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		at := time.Now()
		s.Messages <- Message{Header: r.Header.Clone(), Body: body, At: at}
		s.mu.Lock()
		code := s.status
		s.mu.Unlock()
		w.WriteHeader(code)
	}))
	return s
}

// Answer makes the service answer the next messages with code.
func (s *Service) Answer(code int) {
	s.mu.Lock()
	s.status = code
	s.mu.Unlock()
}
