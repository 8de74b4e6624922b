package pactmcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aether/aether/backend/agent"
	"github.com/aether/aether/backend/owner"
)

// ask is one pact_ask in flight: agent.Run in its own goroutine, bounded by Config.AskLimit,
// which outlives the tool calls that wait on it (an assistant gives up on a call after about a
// minute; the next call with the handle goes on waiting).
type ask struct {
	handle string
	host   string // the node's host, as the owner's approval is asked for

	mu      sync.Mutex
	lines   []string      // what the run said, in order
	told    int           // how many of them a call has told its assistant already
	changed chan struct{} // closed at each new line
	code    string        // the user code, once the device flow started
	done    chan struct{} // closed when ans is final
	ans     Answer
}

// Write takes what agent.Run says, step by step.
func (a *ask) Write(p []byte) (int, error) {
	a.say(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (a *ask) say(line string) {
	a.mu.Lock()
	a.lines = append(a.lines, line)
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
}

// userCode is told when the device flow starts.
func (a *ask) userCode(code, _ string) {
	a.mu.Lock()
	a.code = code
	a.mu.Unlock()
	a.say(fmt.Sprintf("waiting for the owner of %s to approve (code %s)", a.host, code))
}

// askFor is the ask a call names by its handle, or a new one.
func (s *Server) askFor(in AskIn) (*ask, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.Handle != "" {
		a := s.asks[in.Handle]
		if a == nil {
			return nil, fmt.Errorf("no ask with handle %q: it was answered already, or this server restarted; ask again", in.Handle)
		}
		return a, nil
	}
	if strings.TrimSpace(in.Message) == "" || in.URL == "" {
		return nil, errors.New("give url (the brand's card URL) and message, or the handle of an ask still waiting")
	}
	cardURL, err := agent.CardURL(in.URL, in.Brand)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(cardURL)
	if err != nil {
		return nil, err
	}
	if len(s.asks) >= maxAsks {
		return nil, fmt.Errorf("%d asks are waiting already: go on with one of them (its handle) first", maxAsks)
	}
	var h [9]byte
	rand.Read(h[:])
	a := &ask{handle: hex.EncodeToString(h[:]), host: u.Host, changed: make(chan struct{}), done: make(chan struct{})}
	s.asks[a.handle] = a
	go s.run(a, in)
	return a, nil
}

func (s *Server) forget(handle string) {
	s.mu.Lock()
	delete(s.asks, handle)
	s.mu.Unlock()
}

// run walks the flow (agent.Run) and sends the receipt home.
func (s *Server) run(a *ask, in AskIn) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.AskLimit)
	defer cancel()
	res, err := agent.Run(ctx, agent.Options{Card: in.URL, Brand: in.Brand, Message: in.Message, TaskID: in.Task, Stream: true,
		Dir: s.cfg.Dir, Subject: s.cfg.Agent, Identity: s.identity, HTTPClient: s.cfg.HTTPClient, OnUserCode: a.userCode, Log: a,
		Witness: true})
	ans := Answer{State: "answered", Handle: a.handle, Brand: in.Brand, Answer: cut(res.Answer)}
	if res.Card != nil {
		ans.Node, ans.Brand = res.Card.PublicURL, res.Card.Brand
	}
	if res.Task != nil {
		ans.Task = string(res.Task.ID)
	}
	if err != nil {
		ans.State, ans.Error = "failed", err.Error()
	}
	if res.Receipt != nil {
		ans.Receipt = s.home(ctx, res, err)
	}
	fmt.Fprintf(s.cfg.Log, "pact_ask %s: %s %s\n", a.handle, ans.State, ans.Error)
	a.mu.Lock()
	a.ans = ans
	a.mu.Unlock()
	close(a.done)
}

// home is what was checked of the receipt; it hands the receipt to the owner's node.
func (s *Server) home(ctx context.Context, res agent.Result, runErr error) *Proof {
	c := res.Receipt
	p := &Proof{ID: c.RID, Status: string(c.Status), Signature: true, LogIncluded: res.Checkpoint != nil,
		LogConsistent: res.Checkpoint != nil, Ran: owner.Ran(c.Work)}
	if res.Checkpoint != nil {
		p.Checkpoint = fmt.Sprintf("%s (checkpoint of %d receipts)", res.Checkpoint.Origin, res.Checkpoint.Size)
	} else if runErr != nil {
		p.Problem = runErr.Error()
	}
	jwks, err := json.Marshal(res.NodeKeys.JWKS())
	if err == nil {
		_, err = s.cfg.Node.KeepReceived(ctx, owner.ReceivedRequest{Agent: s.cfg.Agent, JWS: res.ReceiptJWS, Proof: res.ReceiptProof,
			JWKS: jwks, LogConsistent: p.LogConsistent, LogProblem: p.Problem})
	}
	if err != nil {
		p.Problem = strings.TrimPrefix(p.Problem+"; ", "; ") + "the owner's node did not keep it: " + err.Error()
	} else {
		p.KeptAtHome = true
	}
	return p
}

// wait waits for the ask, telling notify what the run says that no call told before, at most d
// (or until the caller goes away); then the ask goes on and the answer says "waiting" with its
// handle.
func (a *ask) wait(ctx context.Context, d time.Duration, notify func(context.Context, string)) Answer {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		a.mu.Lock()
		fresh, changed := a.lines[a.told:], a.changed
		a.told = len(a.lines)
		a.mu.Unlock()
		for _, l := range fresh {
			notify(ctx, l)
		}
		select {
		case <-a.done:
			a.mu.Lock()
			defer a.mu.Unlock()
			for _, l := range a.lines[a.told:] {
				notify(ctx, l)
			}
			a.told = len(a.lines)
			return a.ans
		case <-changed:
			continue
		case <-timer.C:
		case <-ctx.Done():
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		w := Answer{State: "waiting", Handle: a.handle, Node: a.host, Code: a.code, Waiting: "the turn is under way on " + a.host}
		if a.code != "" && !strings.Contains(strings.Join(a.lines, "\n"), "Approved:") {
			w.Waiting = fmt.Sprintf("waiting for approval: the owner of %s approves code %s", a.host, a.code)
		}
		return w
	}
}

// notifier tells the assistant each step: a progress notification when the call asked for
// progress, and a log message (shown by assistants that set a log level).
func notifier(req *sdk.CallToolRequest) func(context.Context, string) {
	var tok any
	if req != nil && req.Params != nil {
		tok = req.Params.GetProgressToken()
	}
	n := 0
	return func(ctx context.Context, msg string) {
		if req == nil || req.Session == nil {
			return
		}
		n++
		if tok != nil {
			req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Message: msg, Progress: float64(n)})
		}
		req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Logger: "aether", Data: msg})
	}
}

// identity is the agent's identity for a node's audience, from the owner's node.
func (s *Server) identity(audience string) agent.IdentitySource {
	return &nodeIdentity{s: s, audience: audience}
}

// nodeIdentity mints through the node API, reusing a token until a minute before it expires.
type nodeIdentity struct {
	s        *Server
	audience string

	mu    sync.Mutex
	token string
	exp   time.Time
}

func (n *nodeIdentity) IdentityToken(ctx context.Context) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.token != "" && time.Now().Before(n.exp.Add(-time.Minute)) {
		return n.token, nil
	}
	t, err := n.s.cfg.Node.MintIdentity(ctx, n.s.cfg.Agent, n.audience)
	if err != nil {
		return "", fmt.Errorf("the owner's node gave no identity token for agent %s: %w", n.s.cfg.Agent, err)
	}
	n.token, n.exp = t.Token, t.ExpiresAt
	return t.Token, nil
}

// cut keeps the answer within what an assistant's context should take.
func cut(s string) string {
	if r := []rune(s); len(r) > maxAnswerRunes {
		return string(r[:maxAnswerRunes]) + "\n[… cut: the whole answer is what the receipt signs]"
	}
	return s
}
