package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/datadir"
	"github.com/aether/aether/backend/node"
)

func adminCertFingerprint(t *testing.T, addr string) [32]byte {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // we read the certificate, we do not trust it
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cert := conn.ConnectionState().PeerCertificates[0]
	if len(cert.IPAddresses) == 0 || !cert.IPAddresses[0].IsLoopback() {
		t.Errorf("admin certificate SANs: %v %v", cert.IPAddresses, cert.DNSNames)
	}
	return sha256.Sum256(cert.Raw)
}

func TestDataDir(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.n.Addresses().Admin

	t.Run("admin listener on 127.0.0.1 only", func(t *testing.T) {
		host, _, _ := net.SplitHostPort(admin)
		if host != "127.0.0.1" {
			t.Fatalf("admin listens on %s", admin)
		}
	})
	t.Run("admin.token and the keys are 0600, the folder 0700", func(t *testing.T) {
		for _, f := range []string{"admin.token", "node.key", "admin-tls.key"} {
			fi, err := os.Stat(filepath.Join(e.dataDir, f))
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %v %v", f, fi.Mode(), err)
			}
		}
		if fi, _ := os.Stat(e.dataDir); fi.Mode().Perm() != 0o700 {
			t.Errorf("data dir mode %v", fi.Mode())
		}
	})
	t.Run("a second node on the same data dir refuses to start", func(t *testing.T) {
		o := e.opts
		o.PactListen = "127.0.0.1:0"
		n, err := node.Start(context.Background(), o)
		if err == nil {
			n.Stop(context.Background())
			t.Fatal("a second node started on a locked data dir")
		}
		if !errors.Is(err, datadir.ErrLocked) || !strings.Contains(err.Error(), "already running") {
			t.Fatalf("err = %v", err)
		}
	})

	before := adminCertFingerprint(t, admin)
	alice := e.agent("alice")
	alice.setDelegation(e.delegate(t, alice, "review"))
	task := alice.send(alice.client("review", a2a.TransportProtocolJSONRPC), "", "hello")
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("turn: %s", task.Status.State)
	}
	e.restart()
	t.Run("the admin certificate survives a restart", func(t *testing.T) {
		if after := adminCertFingerprint(t, e.n.Addresses().Admin); after != before {
			t.Fatal("the admin certificate changed across a restart")
		}
	})
	t.Run("T6 DB replaced by an older backup", func(t *testing.T) {
		// A copy of the store from before the turn, restored over the current one.
		e.stop()
		db := filepath.Join(e.dataDir, "pact.sqlite")
		saved := copyFile(t, db)
		e.start()
		alice.send(alice.client("review", a2a.TransportProtocolJSONRPC), "", "another")
		e.stop()
		restoreFile(t, saved, db)
		_, err := node.Start(context.Background(), e.opts)
		if err == nil || !strings.Contains(err.Error(), "lost receipts") {
			t.Fatalf("a rolled-back pact.sqlite was accepted: %v", err)
		}
		// The owner may accept the loss explicitly.
		os.Rename(filepath.Join(e.dataDir, "receipts.head"), filepath.Join(e.dataDir, "receipts.head.old"))
		e.start()
	})
}

func copyFile(t *testing.T, path string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(path))
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, _ := os.Create(dst)
	defer out.Close()
	io.Copy(out, in)
	return dst
}

func restoreFile(t *testing.T, src, dst string) {
	t.Helper()
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(dst + suffix)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
