// Package agent is a reference PACT personal agent: it reads a brand's agent
// card, calls the node over A2A with an identity JWT (from its own loopback
// issuer or one issued elsewhere), runs the OAuth device flow when the node
// answers TASK_STATE_AUTH_REQUIRED, sends the turn again with the delegation
// token, and verifies the signed receipt with the node JWKS. `aether agent`
// is a thin shell over Run; tests reuse Run and the pieces it is made of.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"golang.org/x/oauth2"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/receipts"
)

// DefaultSubject is the sub of the local issuer's tokens when none is given.
const DefaultSubject = "agent"

// Options configure Run.
type Options struct {
	// Card is the brand's card URL, or the node's publicUrl (with Brand, or
	// alone for a node with a single brand).
	Card  string
	Brand string
	// Message is the text of the turn.
	Message string
	// TaskID sends the turn on this existing task instead of a new one.
	TaskID string
	// Stream uses SendStreamingMessage and logs status updates as they arrive.
	Stream bool
	// Binding is a2a.TransportProtocolJSONRPC (default) or a2a.TransportProtocolHTTPJSON.
	Binding a2a.TransportProtocol

	// Dir is the agent's folder: the local issuer's key and address, and the
	// saved delegation tokens. Default DefaultDir().
	Dir string
	// Subject is the sub of the local issuer's tokens. Default DefaultSubject.
	Subject string
	// IssuerAddr is the local issuer's loopback listen address (see IssuerOptions.Addr).
	IssuerAddr string
	// IdentityToken is an identity JWT issued elsewhere; when set, no local
	// issuer runs and this token is sent as it is.
	IdentityToken string
	// Audience is the aud of the identity JWTs the local issuer mints.
	// Default: the node's publicUrl (a node's usual audience).
	Audience string

	// HTTPClient is the base HTTP client (see Client.HTTP).
	HTTPClient *http.Client
	// OnUserCode is told the user code and the link to approve it at, when
	// the device flow starts (tests approve through the admin API here).
	OnUserCode func(userCode, verificationURI string)
	// Log receives each step in words. Default: discarded.
	Log io.Writer
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// PeerCheckpoint is a checkpoint of the node's log another agent holds, compared with the
	// one this agent holds before the turn (logcheck.go).
	PeerCheckpoint []byte
}

// Result is what a run did and got.
type Result struct {
	Card      *Card
	Interface a2a.AgentInterface
	Agent     Who
	// AuthRequired is the node's last AUTH_REQUIRED answer, if it asked for consent.
	AuthRequired *AuthRequired
	// Refreshed: a fresh delegation token came from the agent's existing
	// grant, without the owner. Consented: the owner approved a device flow.
	Refreshed bool
	Consented bool
	// Task is the task as it ended.
	Task       *a2a.Task
	Answer     string
	Receipt    *receipts.Claims // verified
	ReceiptJWS string
	// Checkpoint is the node's log checkpoint the receipt's proof names (verified, and
	// consistent with every one this agent saw before).
	Checkpoint *receipts.Checkpoint
}

// TurnError is a turn that ended without an answer: failed, canceled,
// rejected, or waiting for input.
type TurnError struct {
	TaskID a2a.TaskID
	State  a2a.TaskState
	Reason string
}

func (e *TurnError) Error() string {
	msg := fmt.Sprintf("the turn ended %s (task %s)", stateWord(e.State), e.TaskID)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// Run walks the whole PACT flow once: card, identity, turn, consent when the
// node asks for it (a saved or refreshed token first, else the device flow),
// the turn again, then the answer and its receipt, verified with the node
// JWKS. It returns an error for anything but a completed turn with a
// verified receipt (ErrDenied, ErrExpired, *TurnError, *IdentityRejectedError, …);
// the Result holds what was learnt up to then.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	if strings.TrimSpace(o.Message) == "" {
		return res, errors.New("no message to send")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	say := func(format string, args ...any) { fmt.Fprintf(o.Log, format+"\n", args...) }
	if o.Binding == "" {
		o.Binding = a2a.TransportProtocolJSONRPC
	}
	if o.Subject == "" {
		o.Subject = DefaultSubject
	}
	if o.Dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return res, err
		}
		o.Dir = d
	}

	// 1. The card (public: no credentials).
	c := &Client{HTTP: o.HTTPClient}
	cardURL, err := CardURL(o.Card, o.Brand)
	if err != nil {
		return res, err
	}
	card, err := c.FetchCard(ctx, cardURL)
	if err != nil {
		return res, err
	}
	res.Card = card
	if o.Brand != "" && card.Brand != "" && o.Brand != card.Brand {
		return res, fmt.Errorf("the card at %s is brand %q, not %q", cardURL, card.Brand, o.Brand)
	}
	if card.Brand == "" {
		card.Brand = o.Brand
	}
	say("Card: %s (brand %s) at %s", card.Name, orNone(card.Brand), cardURL)
	if card.Description != "" {
		say("      %s", card.Description)
	}
	say("Node: %s", card.PublicURL)
	keysURL, err := card.KeysURL()
	if err != nil {
		return res, err
	}
	nodeKeys, err := c.NodeKeys(ctx, keysURL)
	if err != nil {
		return res, err
	}
	if err := card.VerifySignature(nodeKeys.Set); err != nil {
		return res, err
	}
	say("      card signature verified with the node JWKS at %s", keysURL)
	logs := newLogCheck(c, card.PublicURL, nodeKeys.Set, o.Dir)
	if err := logs.before(ctx, o.PeerCheckpoint); err != nil {
		return res, err
	}

	// 2. The identity.
	audience := o.Audience
	if audience == "" {
		audience = card.PublicURL
	}
	var who Who
	if o.IdentityToken != "" {
		if who, err = PeekIdentity(o.IdentityToken); err != nil {
			return res, err
		}
		if !who.ExpiresAt.IsZero() && !o.Now().Before(who.ExpiresAt) {
			return res, fmt.Errorf("the identity token expired at %s: get a fresh one from its issuer", who.ExpiresAt.Format(time.RFC3339))
		}
		c.Identity = StaticIdentity(o.IdentityToken)
		say("Agent: %s at issuer %s (identity token given)", who.Subject, who.Issuer)
		if !slices.Contains(who.Audience, audience) {
			say("Warning: the identity token's audience %v does not name %s; the node may refuse it.", who.Audience, audience)
		}
	} else {
		li, err := OpenLocalIssuer(o.Dir, IssuerOptions{Addr: o.IssuerAddr, Now: o.Now})
		if err != nil {
			return res, err
		}
		defer li.Close()
		who = Who{Issuer: li.URL(), Subject: o.Subject, Audience: []string{audience}}
		c.Identity = li.Source(o.Subject, audience)
		say("Agent: %s at the local issuer %s (key %s)", o.Subject, li.URL(), li.KeyID())
		if !li.Serving() {
			say("      (another aether agent run serves this issuer's keys; keep it running)")
		}
	}
	res.Agent = who

	// 3. Connect, with a saved token when there is one.
	conn, err := c.Connect(ctx, card, o.Binding)
	if err != nil {
		return res, err
	}
	defer conn.Close()
	res.Interface = conn.Interface()
	store := tokenStore{path: filepath.Join(o.Dir, tokensFile), now: o.Now}
	key := tokenKey{Node: card.PublicURL, Brand: card.Brand, Issuer: who.Issuer, Subject: who.Subject}
	refreshTried := false
	tok, err := store.load(key)
	if err != nil {
		say("Warning: %v (ignored)", err)
	}
	if tok != nil && !tok.ExpiresAt.IsZero() && !o.Now().Add(30*time.Second).Before(tok.ExpiresAt) {
		say("The saved delegation token has expired; asking for a fresh one from the grant…")
		refreshTried = true
		tok = refresh(ctx, c, card.TokenURL, card.PublicURL, card.Brand, say)
		if tok != nil {
			res.Refreshed = true
			saveToken(store, key, tok, say)
		}
	} else if tok != nil {
		say("Using the delegation token saved from an earlier run%s.", expiresText(tok))
	}
	if tok != nil {
		conn.SetDelegation(tok.AccessToken)
	}

	// 4. The turn, and consent when the node asks for it.
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(o.Message))
	msg.TaskID = a2a.TaskID(o.TaskID)
	send := func(m *a2a.Message) (*a2a.Task, error) {
		var t *a2a.Task
		var err error
		if o.Stream {
			t, err = conn.Stream(ctx, m, func(ev a2a.Event) { sayEvent(say, ev) })
		} else {
			t, err = conn.Send(ctx, m)
		}
		if err != nil {
			return nil, err
		}
		return waitSettled(ctx, conn, t)
	}
	say("Sending the turn over %s to %s…", res.Interface.ProtocolBinding, res.Interface.URL)
	task, err := send(msg)
	if err != nil {
		return res, err
	}
	for task.Status.State == a2a.TaskStateAuthRequired {
		ar, err := ParseAuthRequired(task)
		res.Task, res.AuthRequired = task, ar
		if err != nil {
			return res, err
		}
		say("The node answered AUTH_REQUIRED (reason: %s): %s", ar.Reason, ar.Text)
		if res.Consented {
			return res, fmt.Errorf("the node still asks for consent after the owner approved (reason %s)", ar.Reason)
		}
		devReq := DeviceRequest{
			DeviceAuthorizationURL: firstOf(ar.DeviceAuthorizationURL, card.DeviceAuthorizationURL),
			TokenURL:               firstOf(ar.TokenURL, card.TokenURL),
			Scope:                  firstOf(ar.Scope, card.Scope),
			Brand:                  firstOf(ar.Brand, card.Brand),
		}
		for _, e := range [][2]string{{"deviceAuthorizationUrl", devReq.DeviceAuthorizationURL}, {"tokenUrl", devReq.TokenURL}} {
			if e[1] == "" {
				return res, fmt.Errorf("the node gave no %s for the device flow", e[0])
			}
			if err := checkEndpoint(e[0], e[1], card.PublicURL); err != nil {
				return res, err
			}
		}
		conn.SetDelegation("")
		saveToken(store, key, nil, say)
		tok = nil
		if !refreshTried {
			refreshTried = true
			say("Asking the node for a token from an existing grant…")
			if tok = refresh(ctx, c, devReq.TokenURL, card.PublicURL, devReq.Brand, say); tok != nil {
				res.Refreshed = true
			}
		}
		if tok == nil {
			say("Starting the device flow for scope %s…", orNone(devReq.Scope))
			tok, err = c.DeviceFlow(ctx, devReq, func(code, link string) {
				say("Ask the node owner to approve code %s at %s", code, link)
				say("Waiting for the owner's decision…")
				if o.OnUserCode != nil {
					o.OnUserCode(code, link)
				}
			})
			if err != nil {
				return res, err
			}
			res.Consented = true
			say("Approved: got a delegation token for scope %s%s.", orNone(tok.Scope), expiresText(tok))
		}
		saveToken(store, key, tok, say)
		conn.SetDelegation(tok.AccessToken)

		again := a2a.NewMessage(a2a.MessageRoleUser, msg.Parts...)
		again.TaskID, again.ContextID = ar.ResumeTaskID, ar.ContextID
		say("Sending the turn again on task %s with the delegation token…", again.TaskID)
		task, err = send(again)
		if errors.Is(err, a2a.ErrUnsupportedOperation) {
			// The waiting task ended meanwhile (docs/wire.md: a new task also works).
			say("That task takes no more messages (%v); sending on a new task…", err)
			task, err = send(a2a.NewMessage(a2a.MessageRoleUser, msg.Parts...))
		}
		if err != nil {
			return res, err
		}
	}
	res.Task = task

	// 5. The answer and the receipt.
	out := ReadOutcome(task)
	res.Answer, res.ReceiptJWS = out.Answer, out.ReceiptJWS
	state := task.Status.State
	say("The turn ended %s (task %s).", stateWord(state), task.ID)
	if state == a2a.TaskStateCompleted {
		say("Answer:\n%s", out.Answer)
	}
	if out.ReceiptJWS != "" {
		set, err := c.NodeKeys(ctx, keysURL)
		if err != nil {
			return res, fmt.Errorf("the receipt could not be checked: %w", err)
		}
		want := ReceiptExpect{Issuer: card.PublicURL, TaskID: string(task.ID), Brand: card.Brand,
			Agent: domain.Agent{Issuer: who.Issuer, Subject: who.Subject}}
		if state == a2a.TaskStateCompleted {
			want.Answer = &out.Answer
		}
		claims, err := VerifyReceipt(out.ReceiptJWS, set, want)
		if err == nil && out.ReceiptData != nil {
			err = CheckReceiptData(out.ReceiptData, out.ReceiptJWS)
		}
		if err != nil {
			return res, fmt.Errorf("the receipt does not verify: %w", err)
		}
		res.Receipt = claims
		say("Receipt %s (seq %d, %s): signature verified with the node JWKS (key %s).", claims.RID, claims.Seq, claims.Status, claims.Kid)
		if res.Checkpoint, err = checkAnswerLog(ctx, logs, out, claims.Seq, say); err != nil {
			return res, err
		}
	} else if state == a2a.TaskStateCompleted {
		return res, fmt.Errorf("the node sent no receipt for the completed turn (task %s)", task.ID)
	}
	if state != a2a.TaskStateCompleted {
		return res, &TurnError{TaskID: task.ID, State: state, Reason: StatusText(task)}
	}
	return res, nil
}

// waitSettled polls a task a node answered before it settled (a node that
// does not block on SendMessage) until it does.
func waitSettled(ctx context.Context, conn *Conn, t *a2a.Task) (*a2a.Task, error) {
	delay := 500 * time.Millisecond
	for !settled(t.Status.State) {
		select {
		case <-ctx.Done():
			return t, fmt.Errorf("waiting for task %s: %w", t.ID, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
		next, err := conn.GetTask(ctx, t.ID)
		if err != nil {
			return t, err
		}
		t = next
	}
	return t, nil
}

// refresh tries the grant refresh and says why it did not work.
func refresh(ctx context.Context, c *Client, tokenURL, publicURL, brand string, say func(string, ...any)) *Token {
	if tokenURL == "" || brand == "" {
		say("      (no token endpoint or brand known: skipped)")
		return nil
	}
	if err := checkEndpoint("tokenUrl", tokenURL, publicURL); err != nil {
		say("      skipped: %v", err)
		return nil
	}
	t, err := c.Refresh(ctx, tokenURL, brand)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode != "" {
			err = oauthErr(re) // the node's reason, without the URL
		}
		say("      none: %v", err)
		return nil
	}
	say("      got one%s: no consent needed.", expiresText(t))
	return t
}

func saveToken(s tokenStore, k tokenKey, t *Token, say func(string, ...any)) {
	if err := s.save(k, t); err != nil {
		say("Warning: %v", err)
	}
}

func sayEvent(say func(string, ...any), ev a2a.Event) {
	switch e := ev.(type) {
	case *a2a.Task:
		say("  [%s] task %s", stateWord(e.Status.State), e.ID)
	case *a2a.TaskStatusUpdateEvent:
		if text := messageText(e.Status.Message); text != "" {
			say("  [%s] %s", stateWord(e.Status.State), text)
		} else {
			say("  [%s]", stateWord(e.Status.State))
		}
	case *a2a.TaskArtifactUpdateEvent:
		if e.Artifact != nil {
			say("  [artifact] %s", orNone(e.Artifact.Name))
		}
	}
}

// stateWord is a task state as a word: TASK_STATE_AUTH_REQUIRED → auth-required.
func stateWord(s a2a.TaskState) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s.String(), "TASK_STATE_")), "_", "-")
}

func expiresText(t *Token) string {
	if t.ExpiresAt.IsZero() {
		return ""
	}
	return ", valid until " + t.ExpiresAt.Local().Format("2006-01-02 15:04:05")
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
