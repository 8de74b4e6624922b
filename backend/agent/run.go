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
	"github.com/aether/aether/backend/keys"
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
	// Identity, when set, gives the identity JWTs for the node's audience from an issuer
	// elsewhere (`aether mcp`: the owner's node), asked again for each request; no local
	// issuer runs.
	Identity func(audience string) IdentitySource
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
	// Witness cosigns the checkpoint of the node's log this run verified and sends the
	// cosignature with the next run's call (witness.go).
	Witness bool
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
	// ReceiptProof is the receipt's tlog-proof as the node sent it, and NodeKeys the node JWKS
	// the receipt was verified with: what lets another check it again (`aether mcp` hands
	// both to the owner's node).
	ReceiptProof string
	NodeKeys     keys.History
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
	if strings.TrimSpace(o.Message) == "" {
		return Result{}, errors.New("no message to send")
	}
	o, err := withDefaults(o)
	if err != nil {
		return Result{}, err
	}
	r := &run{o: o, c: &Client{HTTP: o.HTTPClient},
		say: func(format string, args ...any) { fmt.Fprintf(o.Log, format+"\n", args...) }}

	// 1. The card (public: no credentials).
	if err := r.readCard(ctx); err != nil {
		return r.res, err
	}
	// 2. The identity.
	closeIssuer, err := r.identify(ctx)
	if err != nil {
		return r.res, err
	}
	defer closeIssuer()
	// 3. Connect, with a saved token when there is one.
	conn, err := r.c.Connect(ctx, r.card, o.Binding)
	if err != nil {
		return r.res, err
	}
	defer conn.Close()
	r.conn = conn
	r.res.Interface = conn.Interface()
	r.loadToken(ctx)
	// 4. The turn, and consent when the node asks for it.
	task, err := r.turn(ctx)
	if err != nil {
		return r.res, err
	}
	r.res.Task = task
	// 5. The answer and the receipt.
	return r.res, r.outcome(ctx, task)
}

// run is one Run's state, filled in step by step.
type run struct {
	o   Options
	res Result
	say func(format string, args ...any)
	c   *Client

	card    *Card
	keysURL string
	logs    *LogCheck
	who     Who
	conn    *Conn
	store   tokenStore
	key     TokenKey
	// refreshTried: the grant refresh was asked once; a second ask would get the same answer.
	refreshTried bool
}

// withDefaults fills in Options' zero values.
func withDefaults(o Options) (Options, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Binding == "" {
		o.Binding = a2a.TransportProtocolJSONRPC
	}
	if o.Subject == "" {
		o.Subject = DefaultSubject
	}
	if o.Dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return o, err
		}
		o.Dir = d
	}
	return o, nil
}

// readCard fetches the brand's card and checks its signature with the node JWKS.
func (r *run) readCard(ctx context.Context) error {
	o, say := r.o, r.say
	cardURL, err := CardURL(o.Card, o.Brand)
	if err != nil {
		return err
	}
	card, err := r.c.FetchCard(ctx, cardURL)
	if err != nil {
		return err
	}
	r.res.Card, r.card = card, card
	if o.Brand != "" && card.Brand != "" && o.Brand != card.Brand {
		return fmt.Errorf("the card at %s is brand %q, not %q", cardURL, card.Brand, o.Brand)
	}
	if card.Brand == "" {
		card.Brand = o.Brand
	}
	say("Card: %s (brand %s) at %s", card.Name, orNone(card.Brand), cardURL)
	if card.Description != "" {
		say("      %s", card.Description)
	}
	say("Node: %s", card.PublicURL)
	if r.keysURL, err = card.KeysURL(); err != nil {
		return err
	}
	nodeKeys, err := r.c.NodeKeys(ctx, r.keysURL)
	if err != nil {
		return err
	}
	if err := card.VerifySignature(nodeKeys.Set); err != nil {
		return err
	}
	say("      card signature verified with the node JWKS at %s", r.keysURL)
	if r.logs, err = NewLogCheck(r.c, card.PublicURL, nodeKeys, o.Dir); err != nil {
		return err
	}
	return r.logs.Before(ctx, o.PeerCheckpoint)
}

// identify sets the client's identity: the token given, else the local issuer's, which
// the returned func closes.
func (r *run) identify(ctx context.Context) (func(), error) {
	o, say := r.o, r.say
	audience := o.Audience
	if audience == "" {
		audience = r.card.PublicURL
	}
	if o.Identity != nil {
		src := o.Identity(audience)
		tok, err := src.IdentityToken(ctx)
		if err != nil {
			return nil, err
		}
		if r.who, err = PeekIdentity(tok); err != nil {
			return nil, err
		}
		r.res.Agent, r.c.Identity = r.who, src
		say("Agent: %s at issuer %s", r.who.Subject, r.who.Issuer)
		return func() {}, nil
	}
	if o.IdentityToken != "" {
		who, err := PeekIdentity(o.IdentityToken)
		if err != nil {
			return nil, err
		}
		if !who.ExpiresAt.IsZero() && !o.Now().Before(who.ExpiresAt) {
			return nil, fmt.Errorf("the identity token expired at %s: get a fresh one from its issuer", who.ExpiresAt.Format(time.RFC3339))
		}
		r.c.Identity = StaticIdentity(o.IdentityToken)
		say("Agent: %s at issuer %s (identity token given)", who.Subject, who.Issuer)
		if !slices.Contains(who.Audience, audience) {
			say("Warning: the identity token's audience %v does not name %s; the node may refuse it.", who.Audience, audience)
		}
		r.who, r.res.Agent = who, who
		return func() {}, nil
	}
	li, err := OpenLocalIssuer(o.Dir, IssuerOptions{Addr: o.IssuerAddr, Now: o.Now})
	if err != nil {
		return nil, err
	}
	r.who = Who{Issuer: li.URL(), Subject: o.Subject, Audience: []string{audience}}
	r.res.Agent = r.who
	r.c.Identity = li.Source(o.Subject, audience)
	say("Agent: %s at the local issuer %s (key %s)", o.Subject, li.URL(), li.KeyID())
	if !li.Serving() {
		say("      (another aether agent run serves this issuer's keys; keep it running)")
	}
	return func() { li.Close() }, nil
}

// loadToken gives the connection the delegation token saved from an earlier run, or a
// fresh one from the grant when that one has expired.
func (r *run) loadToken(ctx context.Context) {
	card, say := r.card, r.say
	r.store = tokenStore{path: filepath.Join(r.o.Dir, tokensFile), now: r.o.Now}
	r.key = TokenKey{Node: card.PublicURL, Brand: card.Brand, Issuer: r.who.Issuer, Subject: r.who.Subject}
	tok, err := r.store.load(r.key)
	if err != nil {
		say("Warning: %v (ignored)", err)
	}
	if tok != nil && !tok.ExpiresAt.IsZero() && !r.o.Now().Add(30*time.Second).Before(tok.ExpiresAt) {
		say("The saved delegation token has expired; asking for a fresh one from the grant…")
		r.refreshTried = true
		tok = refresh(ctx, r.c, card.TokenURL, card.PublicURL, card.Brand, say)
		if tok != nil {
			r.res.Refreshed = true
			saveToken(r.store, r.key, tok, say)
		}
	} else if tok != nil {
		say("Using the delegation token saved from an earlier run%s.", expiresText(tok))
	}
	if tok != nil {
		r.conn.SetDelegation(tok.AccessToken)
	}
}

// turn sends the message and, for as long as the node answers AUTH_REQUIRED, gets
// consent and sends it again; it returns the task as it settled.
func (r *run) turn(ctx context.Context) (*a2a.Task, error) {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(r.o.Message))
	msg.TaskID = a2a.TaskID(r.o.TaskID)
	meta, err := r.logs.Cosignature()
	if err != nil {
		return nil, err
	}
	msg.Metadata = meta
	r.say("Sending the turn over %s to %s…", r.res.Interface.ProtocolBinding, r.res.Interface.URL)
	task, err := r.send(ctx, msg)
	if err != nil {
		return nil, err
	}
	for task.Status.State == a2a.TaskStateAuthRequired {
		ar, err := ParseAuthRequired(task)
		r.res.Task, r.res.AuthRequired = task, ar
		if err != nil {
			return nil, err
		}
		r.say("The node answered AUTH_REQUIRED (reason: %s): %s", ar.Reason, ar.Text)
		if r.res.Consented {
			return nil, fmt.Errorf("the node still asks for consent after the owner approved (reason %s)", ar.Reason)
		}
		if err := r.consent(ctx, ar); err != nil {
			return nil, err
		}
		if task, err = r.sendAgain(ctx, msg, ar); err != nil {
			return nil, err
		}
	}
	return task, nil
}

// send sends one message, streamed or not, and waits for its task to settle.
func (r *run) send(ctx context.Context, m *a2a.Message) (*a2a.Task, error) {
	var t *a2a.Task
	var err error
	if r.o.Stream {
		t, err = r.conn.Stream(ctx, m, func(ev a2a.Event) { sayEvent(r.say, ev) })
	} else {
		t, err = r.conn.Send(ctx, m)
	}
	if err != nil {
		return nil, err
	}
	return waitSettled(ctx, r.conn, t)
}

// consent gets a delegation token for the node's AUTH_REQUIRED answer: from the agent's
// existing grant once, else through the device flow, which the owner approves.
func (r *run) consent(ctx context.Context, ar *AuthRequired) error {
	say := r.say
	devReq, err := r.deviceRequest(ar)
	if err != nil {
		return err
	}
	r.conn.SetDelegation("")
	saveToken(r.store, r.key, nil, say)
	var tok *Token
	if !r.refreshTried {
		r.refreshTried = true
		say("Asking the node for a token from an existing grant…")
		if tok = refresh(ctx, r.c, devReq.TokenURL, r.card.PublicURL, devReq.Brand, say); tok != nil {
			r.res.Refreshed = true
		}
	}
	if tok == nil {
		say("Starting the device flow for scope %s…", orNone(devReq.Scope))
		tok, err = r.c.DeviceFlow(ctx, devReq, func(code, link string) {
			say("Ask the node owner to approve code %s at %s", code, link)
			say("Waiting for the owner's decision…")
			if r.o.OnUserCode != nil {
				r.o.OnUserCode(code, link)
			}
		})
		if err != nil {
			return err
		}
		r.res.Consented = true
		say("Approved: got a delegation token for scope %s%s.", orNone(tok.Scope), expiresText(tok))
	}
	saveToken(r.store, r.key, tok, say)
	r.conn.SetDelegation(tok.AccessToken)
	return nil
}

// deviceRequest is the device flow the node's answer asks for, the card filling in what
// it leaves out; its endpoints must be the node's own.
func (r *run) deviceRequest(ar *AuthRequired) (DeviceRequest, error) {
	card := r.card
	devReq := DeviceRequest{
		DeviceAuthorizationURL: firstOf(ar.DeviceAuthorizationURL, card.DeviceAuthorizationURL),
		TokenURL:               firstOf(ar.TokenURL, card.TokenURL),
		Scope:                  firstOf(ar.Scope, card.Scope),
		Brand:                  firstOf(ar.Brand, card.Brand),
	}
	for _, e := range [][2]string{{"deviceAuthorizationUrl", devReq.DeviceAuthorizationURL}, {"tokenUrl", devReq.TokenURL}} {
		if e[1] == "" {
			return devReq, fmt.Errorf("the node gave no %s for the device flow", e[0])
		}
		if err := checkEndpoint(e[0], e[1], card.PublicURL); err != nil {
			return devReq, err
		}
	}
	return devReq, nil
}

// sendAgain sends the turn once more, with the delegation token, on the task that waited.
func (r *run) sendAgain(ctx context.Context, msg *a2a.Message, ar *AuthRequired) (*a2a.Task, error) {
	again := a2a.NewMessage(a2a.MessageRoleUser, msg.Parts...)
	again.TaskID, again.ContextID, again.Metadata = ar.ResumeTaskID, ar.ContextID, msg.Metadata
	r.say("Sending the turn again on task %s with the delegation token…", again.TaskID)
	task, err := r.send(ctx, again)
	if errors.Is(err, a2a.ErrUnsupportedOperation) {
		// The waiting task ended meanwhile (docs/wire.md: a new task also works).
		r.say("That task takes no more messages (%v); sending on a new task…", err)
		fresh := a2a.NewMessage(a2a.MessageRoleUser, msg.Parts...)
		fresh.Metadata = msg.Metadata
		task, err = r.send(ctx, fresh)
	}
	return task, err
}

// outcome reads the answer and the receipt off the settled task; anything but a
// completed turn with a verified receipt is an error.
func (r *run) outcome(ctx context.Context, task *a2a.Task) error {
	out := ReadOutcome(task)
	r.res.Answer, r.res.ReceiptJWS = out.Answer, out.ReceiptJWS
	state := task.Status.State
	r.say("The turn ended %s (task %s).", stateWord(state), task.ID)
	if state == a2a.TaskStateCompleted {
		r.say("Answer:\n%s", out.Answer)
	}
	if out.ReceiptJWS != "" {
		if err := r.verifyReceipt(ctx, task, out); err != nil {
			return err
		}
	} else if state == a2a.TaskStateCompleted {
		return fmt.Errorf("the node sent no receipt for the completed turn (task %s)", task.ID)
	}
	if state != a2a.TaskStateCompleted {
		return &TurnError{TaskID: task.ID, State: state, Reason: StatusText(task)}
	}
	return nil
}

// verifyReceipt checks the turn's receipt with the node JWKS, fetched again: against the
// card's node and brand, this agent, the task and, for a completed turn, the answer.
func (r *run) verifyReceipt(ctx context.Context, task *a2a.Task, out Outcome) error {
	set, err := r.c.NodeKeys(ctx, r.keysURL)
	if err != nil {
		return fmt.Errorf("the receipt could not be checked: %w", err)
	}
	want := ReceiptExpect{Issuer: r.card.PublicURL, TaskID: string(task.ID), Brand: r.card.Brand,
		Agent: domain.Agent{Issuer: r.who.Issuer, Subject: r.who.Subject}}
	if task.Status.State == a2a.TaskStateCompleted {
		want.Answer = &out.Answer
	}
	claims, err := VerifyReceipt(out.ReceiptJWS, set, want)
	if err == nil && out.ReceiptData != nil {
		err = CheckReceiptData(out.ReceiptData, out.ReceiptJWS)
	}
	if err != nil {
		return fmt.Errorf("the receipt does not verify: %w", err)
	}
	r.res.Receipt, r.res.ReceiptProof, r.res.NodeKeys = claims, out.ReceiptProof, set
	r.say("Receipt %s (seq %d, %s): signature verified with the node JWKS (key %s).", claims.RID, claims.Seq, claims.Status, claims.Kid)
	if r.res.Checkpoint, err = checkAnswerLog(ctx, r.logs, out, claims.Seq, r.say); err != nil || !r.o.Witness {
		return err
	}
	return r.witness()
}

// witness cosigns the checkpoint held for the node, for the next call (witness.go).
func (r *run) witness() error {
	c, err := r.cosigner()
	if err != nil {
		return fmt.Errorf("the witness key: %w", err)
	}
	if err := r.logs.Cosign(c); err != nil {
		return fmt.Errorf("cosign the node's checkpoint: %w", err)
	}
	r.say("      cosigned that checkpoint as witness %s; the next call sends the cosignature.", c.Name())
	return nil
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

func saveToken(s tokenStore, k TokenKey, t *Token, say func(string, ...any)) {
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
