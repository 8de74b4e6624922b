// Command agent is a small personal agent for the desktop GUI test and the B6 bench. It
// serves its own identity issuer on loopback (OpenID discovery and a JWKS with one Ed25519
// key), signs identity JWTs with it, and walks PACT against a node's gateway: a turn
// without delegation (AUTH_REQUIRED), the device authorization request, polling for the
// owner's decision, and the delegated turn whose signed receipt it verifies with the
// node's JWKS. It prints one line per step on stdout:
//
//	ISSUER <url>
//	AUTH_REQUIRED task=<id>
//	DEVICE_REQUEST <unix ms when sent>
//	USER_CODE <code> <verification_uri_complete>
//	GRANTED | DENIED | EXPIRED
//	TURN state=<state> answer=<text>
//	RECEIPT id=<id> verified
//	DONE
//
// With -request-only it stops after USER_CODE (the request stays pending).
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/golang-jwt/jwt/v5"

	"github.com/aether/aether/backend/cardjson"
)

func main() {
	gateway := flag.String("gateway", "http://127.0.0.1:8080", "the node's publicUrl")
	audience := flag.String("audience", "", "identity JWT audience (default: -gateway)")
	brand := flag.String("brand", "review", "brand id")
	subject := flag.String("sub", "alice", "the agent's subject")
	prompt := flag.String("prompt", "Review the README, please.", "the turn's text")
	requestOnly := flag.Bool("request-only", false, "stop after the device authorization request")
	wait := flag.Duration("wait", 2*time.Minute, "how long to wait for the owner")
	flag.Parse()
	if *audience == "" {
		*audience = *gateway
	}
	if err := run(*gateway, *audience, *brand, *subject, *prompt, *requestOnly, *wait); err != nil {
		fmt.Printf("FAIL %v\n", err)
		os.Exit(1)
	}
	fmt.Println("DONE")
}

type issuer struct {
	url string
	key ed25519.PrivateKey
	aud string
	sub string
}

// startIssuer serves discovery and the JWKS on a loopback port.
func startIssuer(aud, sub string) (*issuer, error) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	iss := &issuer{url: "http://" + ln.Addr().String(), key: key, aud: aud, sub: sub}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": iss.url, "jwks_uri": iss.url + "/jwks.json"})
	})
	mux.HandleFunc("GET /jwks.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"keys": []any{map[string]string{
			"kty": "OKP", "crv": "Ed25519", "kid": "agent-1", "alg": "EdDSA", "use": "sig",
			"x": base64.RawURLEncoding.EncodeToString(pub),
		}}})
	})
	go http.Serve(ln, mux)
	return iss, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// token is a fresh identity JWT.
func (i *issuer) token() string {
	now := time.Now()
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{
		"iss": i.url, "sub": i.sub, "aud": i.aud, "iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(),
		"jti": base64.RawURLEncoding.EncodeToString(randomBytes(12)),
	})
	t.Header["kid"] = "agent-1"
	s, err := t.SignedString(i.key)
	if err != nil {
		panic(err) // an Ed25519 key always signs
	}
	return s
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// fetchCard reads the brand's agent card as served: its security requirements are in A2A
// 1.0's StringList form, which backend/cardjson reads and a2a-go's own decoder does not.
func fetchCard(ctx context.Context, cardURL string) (*a2a.AgentCard, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", cardURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", cardURL, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	var card a2a.AgentCard
	if err := cardjson.Unmarshal(data, &card); err != nil {
		return nil, err
	}
	return &card, nil
}

func run(gateway, aud, brand, sub, prompt string, requestOnly bool, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait+time.Minute)
	defer cancel()
	iss, err := startIssuer(aud, sub)
	if err != nil {
		return err
	}
	fmt.Println("ISSUER", iss.url)
	card, err := fetchCard(ctx, strings.TrimRight(gateway, "/")+"/a2a/"+brand+"/.well-known/agent-card.json")
	if err != nil {
		return fmt.Errorf("agent card: %w", err)
	}
	client, err := a2aclient.NewFromCard(ctx, card)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	defer client.Destroy()

	// 1. A turn without delegation: the node answers AUTH_REQUIRED with what to do.
	first, err := send(ctx, client, iss, "", "", prompt)
	if err != nil {
		return fmt.Errorf("first turn: %w", err)
	}
	if first.Status.State != a2a.TaskStateAuthRequired {
		return fmt.Errorf("first turn: state %s, want AUTH_REQUIRED", first.Status.State)
	}
	fmt.Printf("AUTH_REQUIRED task=%s\n", first.ID)
	info := authInfo(first)
	devURL, _ := info["deviceAuthorizationUrl"].(string)
	tokURL, _ := info["tokenUrl"].(string)
	scope, _ := info["scope"].(string)
	if devURL == "" || tokURL == "" || scope == "" {
		return fmt.Errorf("AUTH_REQUIRED without deviceAuthorizationUrl/tokenUrl/scope: %v", info)
	}

	// 2. The device authorization request: the owner gets a notification now.
	fmt.Printf("DEVICE_REQUEST %d\n", time.Now().UnixMilli())
	var da struct {
		DeviceCode              string `json:"device_code"`
		UserCode                string `json:"user_code"`
		VerificationURIComplete string `json:"verification_uri_complete"`
		Interval                int    `json:"interval"`
	}
	if err := postForm(ctx, devURL, iss.token(), url.Values{"scope": {scope}, "brand": {brand}}, &da); err != nil {
		return fmt.Errorf("device authorization: %w", err)
	}
	fmt.Printf("USER_CODE %s %s\n", da.UserCode, da.VerificationURIComplete)
	if requestOnly {
		return nil
	}

	// 3. Poll until the owner decides.
	interval := time.Duration(max(da.Interval, 1)) * time.Second
	deadline := time.Now().Add(wait)
	var delegation string
	for delegation == "" {
		if time.Now().After(deadline) {
			return errors.New("the owner did not decide in time")
		}
		time.Sleep(interval)
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		err := postForm(ctx, tokURL, iss.token(), url.Values{
			"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {da.DeviceCode},
		}, &tok)
		var oe *oauthError
		switch {
		case err == nil:
			delegation = tok.AccessToken
		case errors.As(err, &oe) && oe.Code == "authorization_pending":
		case errors.As(err, &oe) && oe.Code == "slow_down":
			interval += 5 * time.Second
		case errors.As(err, &oe) && oe.Code == "access_denied":
			fmt.Println("DENIED")
			return errors.New("the owner denied the request")
		case errors.As(err, &oe) && oe.Code == "expired_token":
			fmt.Println("EXPIRED")
			return errors.New("the request expired")
		default:
			return fmt.Errorf("token: %w", err)
		}
	}
	fmt.Println("GRANTED")

	// 4. The delegated turn, on the same task.
	task, err := send(ctx, client, iss, delegation, first.ID, prompt)
	if err != nil {
		return fmt.Errorf("delegated turn: %w", err)
	}
	answer, jws := "", ""
	for _, art := range task.Artifacts {
		for _, p := range art.Parts {
			if t := p.Text(); t != "" {
				if art.Name == "receipt" {
					if p.Filename != "receipt.tlog-proof" { // the JWS, not its proof in the receipts log
						jws = t
					}
				} else if answer == "" {
					answer = t
				}
			}
		}
	}
	fmt.Printf("TURN state=%s answer=%q\n", task.Status.State, shorten(answer, 80))
	if task.Status.State != a2a.TaskStateCompleted {
		return fmt.Errorf("the turn ended %s: %s", task.Status.State, statusText(task))
	}
	if jws == "" {
		return errors.New("no receipt artifact")
	}
	id, err := verifyReceipt(ctx, strings.TrimRight(gateway, "/")+"/.well-known/jwks.json", jws)
	if err != nil {
		return fmt.Errorf("receipt: %w", err)
	}
	fmt.Printf("RECEIPT id=%s verified\n", id)
	return nil
}

// send runs one turn with the identity JWT (and the delegation token when given).
func send(ctx context.Context, client *a2aclient.Client, iss *issuer, delegation string, task a2a.TaskID, text string) (*a2a.Task, error) {
	params := a2aclient.ServiceParams{}
	params.Append("Authorization", "Bearer "+iss.token())
	if delegation != "" {
		params.Append("PACT-Delegation", delegation)
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	msg.TaskID = task
	res, err := client.SendMessage(a2aclient.AttachServiceParams(ctx, params), &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		return nil, err
	}
	t, ok := res.(*a2a.Task)
	if !ok {
		return nil, fmt.Errorf("answer is a %T, not a task", res)
	}
	return t, nil
}

func authInfo(t *a2a.Task) map[string]any {
	if t.Status.Message == nil {
		return nil
	}
	for _, p := range t.Status.Message.Parts {
		if m, ok := p.Data().(map[string]any); ok {
			return m
		}
	}
	return nil
}

func statusText(t *a2a.Task) string {
	if t.Status.Message == nil {
		return ""
	}
	var parts []string
	for _, p := range t.Status.Message.Parts {
		if s := p.Text(); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " ")
}

type oauthError struct {
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

func (e *oauthError) Error() string { return e.Code + ": " + e.Description }

func postForm(ctx context.Context, u, bearer string, form url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		oe := &oauthError{}
		if json.Unmarshal(body, oe) == nil && oe.Code != "" {
			return oe
		}
		return fmt.Errorf("%s: %s", resp.Status, shorten(string(body), 200))
	}
	return json.Unmarshal(body, out)
}

// verifyReceipt checks the receipt's signature with the node's published keys.
func verifyReceipt(ctx context.Context, jwksURL, jws string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, jwksURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	kf, err := keyfunc.NewJWKSetJSON(raw)
	if err != nil {
		return "", fmt.Errorf("node JWKS: %w", err)
	}
	claims := jwt.MapClaims{}
	if _, err := jwt.ParseWithClaims(jws, claims, kf.Keyfunc, jwt.WithValidMethods([]string{"EdDSA"})); err != nil {
		return "", err
	}
	id, _ := claims["id"].(string)
	if id == "" {
		id, _ = claims["jti"].(string)
	}
	return id, nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
