package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"tailscale.com/ipn/store/mem"
	"tailscale.com/net/netns"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
	"tailscale.com/tstest/integration"
	"tailscale.com/tstest/integration/testcontrol"
	"tailscale.com/types/logger"

	"github.com/aether/aether/backend/node"
	ownerpkg "github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/reach"
)

// The tailnet of the Funnel tests, all on loopback: Tailscale's own test control server and
// DERP/STUN relay (as tailscale.com/tsnet's TestFunnel runs them), a test CA standing in for
// Let's Encrypt, and a second tsnet node acting as the Funnel ingress, which real Funnel
// runs on Tailscale's servers (docs/deploy.md says what this leaves untested).
const tailnetDomain = "tail-scale.ts.net"

type tailnet struct {
	control *testcontrol.Server
	url     string
	ca      *testCA
}

// newTailnet starts the control server; caps nil gives every node HTTPS and funnel,
// requireAuth makes nodes wait for a login (control.CompleteAuth).
func newTailnet(t *testing.T, caps *tailcfg.NodeCapMap, requireAuth bool) *tailnet {
	t.Helper()
	netns.SetEnabled(false) // loopback only: no socket marks (tsnet's own tests do the same)
	t.Cleanup(func() { netns.SetEnabled(true) })
	derpMap := integration.RunDERPAndSTUN(t, logger.Discard, "127.0.0.1")
	c := &testcontrol.Server{
		DERPMap: derpMap, DNSConfig: &tailcfg.DNSConfig{Proxied: true}, MagicDNSDomain: tailnetDomain,
		DefaultNodeCapabilities: caps, RequireAuth: requireAuth, Logf: logger.Discard,
	}
	c.HTTPTestServer = httptest.NewUnstartedServer(c)
	c.HTTPTestServer.Start()
	t.Cleanup(c.HTTPTestServer.Close)
	return &tailnet{control: c, url: c.HTTPTestServer.URL, ca: newTestCA(t)}
}

// withFunnel publishes the env's node on tn; its agents' issuer is a public one, as a public
// gateway accepts no other (docs/threats.md N4).
func withFunnel(tn *tailnet) envOption {
	return func(c *envConfig) {
		withPublicIssuer()(c)
		withNode(func(o *node.Options) {
			o.Funnel = true
			o.Reach = reach.Config{ControlURL: tn.url, Ephemeral: true, TLS: tn.ca.tlsConfig(), Hostname: "aether"}
		})(c)
	}
}

// waitReach waits until the node's Reachability satisfies ok, and returns it.
func waitReach(t *testing.T, e *env, what string, ok func(ownerpkg.Reachability) bool) ownerpkg.Reachability {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		r := e.n.Owner().Reachability()
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reachability never became %s: %+v", what, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ingress is a second tsnet node the control server marks as a Funnel ingress: it dials the
// published node's PeerAPI and asks it, as Tailscale's ingress servers do, to take a public
// client's connection (POST /v0/ingress, answered 101).
type ingress struct {
	t      *testing.T
	srv    *tsnet.Server
	target *tsnet.Server
	ca     *testCA
	mu     sync.Mutex
	src    string // the public client address it reports
}

func newIngress(t *testing.T, tn *tailnet, target *tsnet.Server) *ingress {
	t.Helper()
	s := &tsnet.Server{Dir: t.TempDir(), ControlURL: tn.url, Hostname: "ingress", Store: new(mem.Store), Ephemeral: true, Logf: logger.Discard, UserLogf: logger.Discard}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	st, err := s.Up(ctx)
	if err != nil {
		t.Fatalf("ingress node: %v", err)
	}
	tn.control.SetUnsignedPeerAPIOnly(st.Self.PublicKey, true)
	lc, err := target.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	ip := st.TailscaleIPs[0].String()
	for {
		who, err := lc.WhoIs(ctx, ip)
		if err == nil && who.Node.UnsignedPeerAPIOnly {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the published node never saw the ingress as one: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &ingress{t: t, srv: s, target: target, ca: tn.ca, src: "198.51.100.7:40001"}
}

// from sets the public address the ingress reports for the next connections.
func (in *ingress) from(src string) {
	in.mu.Lock()
	in.src = src
	in.mu.Unlock()
}

// dial is a public client's connection to addr (host:443) through the ingress.
func (in *ingress) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	lc, err := in.target.LocalClient()
	if err != nil {
		return nil, err
	}
	st, err := lc.StatusWithoutPeers(ctx)
	if err != nil {
		return nil, err
	}
	peerAPI, ok := strings.CutPrefix(st.Self.PeerAPIURL[len(st.Self.PeerAPIURL)-1], "http://")
	if !ok {
		return nil, fmt.Errorf("unexpected PeerAPI URL %q", st.Self.PeerAPIURL)
	}
	conn, err := in.srv.Dial(ctx, "tcp", peerAPI)
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequest("POST", "/v0/ingress", nil)
	req.Host = peerAPI
	in.mu.Lock()
	req.Header.Set("Tailscale-Ingress-Src", in.src)
	in.mu.Unlock()
	req.Header.Set("Tailscale-Ingress-Target", addr)
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		conn.Close()
		return nil, fmt.Errorf("ingress: %s", resp.Status)
	}
	return &bufferedConn{Conn: conn, r: br}, nil
}

// client is a public client's HTTP client: every connection through the ingress, TLS
// checked against the test CA for the ts.net name.
func (in *ingress) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: in.dial, TLSClientConfig: &tls.Config{RootCAs: in.ca.pool()}}}
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// testCA issues the published node's certificate for its ts.net name, as Let's Encrypt does
// for a real tailnet.
type testCA struct {
	root *x509.Certificate
	key  *ecdsa.PrivateKey
	mu   sync.Mutex
	leaf map[string]*tls.Certificate
}

func newTestCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "funnel test root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := x509.ParseCertificate(der)
	return &testCA{root: root, key: key, leaf: map[string]*tls.Certificate{}}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.root)
	return p
}

// tlsConfig serves a certificate for any name under the tailnet's domain.
func (ca *testCA) tlsConfig() *tls.Config {
	return &tls.Config{GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		name := hello.ServerName
		if !strings.HasSuffix(name, "."+tailnetDomain) {
			return nil, fmt.Errorf("no certificate for %q", name)
		}
		ca.mu.Lock()
		defer ca.mu.Unlock()
		if c := ca.leaf[name]; c != nil {
			return c, nil
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
			DNSNames: []string{name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.root, &key.PublicKey, ca.key)
		if err != nil {
			return nil, err
		}
		c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
		ca.leaf[name] = c
		return c, nil
	}}
}
