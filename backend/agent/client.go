package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// Client talks to PACT nodes for one agent identity. Its methods can be used
// on their own: FetchCard, Connect (then Conn.Send / Conn.Stream), DeviceFlow,
// Refresh and NodeKeys.
type Client struct {
	// Identity gives the identity JWT sent on A2A calls and to the device-flow
	// endpoints. FetchCard and NodeKeys do not need it.
	Identity IdentitySource
	// HTTP is the base client whose Transport carries every request (TLS
	// roots, proxies). Nil: a default transport. Its Timeout and redirect
	// policy are not used: turns can be long, and credentials never follow
	// a redirect.
	HTTP *http.Client
}

var (
	defaultTransportOnce sync.Once
	defaultRT            http.RoundTripper
)

func (c *Client) transport() http.RoundTripper {
	if c.HTTP != nil && c.HTTP.Transport != nil {
		return c.HTTP.Transport
	}
	defaultTransportOnce.Do(func() {
		defaultRT = &http.Transport{
			Proxy:                  http.ProxyFromEnvironment,
			DialContext:            (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:    10 * time.Second,
			IdleConnTimeout:        90 * time.Second,
			ExpectContinueTimeout:  time.Second,
			MaxResponseHeaderBytes: 64 << 10, // a node's headers are small; net/http allows 10 MiB
			ForceAttemptHTTP2:      true,
		}
	})
	return defaultRT
}

// fetchClient reads public documents: no credentials, redirects followed.
func (c *Client) fetchClient() *http.Client {
	return &http.Client{Transport: c.transport(), Timeout: 30 * time.Second}
}

// oauthClient carries the identity JWT to the device-flow endpoints.
func (c *Client) oauthClient() *http.Client {
	return &http.Client{
		Transport:     &BearerTransport{Identity: c.Identity, Base: c.transport()},
		Timeout:       30 * time.Second,
		CheckRedirect: noRedirect,
	}
}

// Conn is an A2A client for one interface of one brand, with the PACT
// credentials attached as headers by a call interceptor.
type Conn struct {
	client    *a2aclient.Client
	auth      *pactAuth
	iface     a2a.AgentInterface
	streaming bool
}

// Connect makes an A2A client (the official a2a-go one) for the card's
// interface of the given binding. Every call carries "Authorization: Bearer
// <identity JWT>"; turns also carry PACT-Delegation once SetDelegation is called.
func (c *Client) Connect(ctx context.Context, card *Card, binding a2a.TransportProtocol) (*Conn, error) {
	if c.Identity == nil {
		return nil, errors.New("connect: the client has no identity")
	}
	in, err := card.Interface(binding)
	if err != nil {
		return nil, err
	}
	if err := checkEndpoint("the A2A endpoint", in.URL, card.PublicURL); err != nil {
		return nil, err
	}
	auth := &pactAuth{identity: c.Identity, activate: card.declares(ExtensionURI)}
	hc := &http.Client{Transport: StreamAnswers(rejectingTransport{base: c.transport()}), CheckRedirect: noRedirect}
	cl, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{in},
		a2aclient.WithJSONRPCTransport(hc),
		a2aclient.WithRESTTransport(hc),
		a2aclient.WithCallInterceptors(auth))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", in.URL, err)
	}
	return &Conn{client: cl, auth: auth, iface: *in, streaming: card.Capabilities.Streaming}, nil
}

// Interface is the interface the connection uses.
func (cn *Conn) Interface() a2a.AgentInterface { return cn.iface }

// SetDelegation sets the delegation token sent in PACT-Delegation on every
// later turn ("" stops sending it).
func (cn *Conn) SetDelegation(token string) { cn.auth.setDelegation(token) }

// Close releases the client.
func (cn *Conn) Close() error { return cn.client.Destroy() }

// Send sends msg as a blocking SendMessage and returns the task the node answers.
func (cn *Conn) Send(ctx context.Context, msg *a2a.Message) (*a2a.Task, error) {
	res, err := cn.client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		return nil, fmt.Errorf("send message: %w", err)
	}
	switch r := res.(type) {
	case *a2a.Task:
		return r, nil
	case *a2a.Message:
		return nil, fmt.Errorf("the node answered with a message, not a task: %q", messageText(r))
	}
	return nil, fmt.Errorf("send message: unexpected result %T", res)
}

// Stream sends msg with SendStreamingMessage, calls onEvent (when not nil)
// with each event as it arrives, and returns the task the events build up.
// It stops reading at a terminal or interrupted state. A card without
// streaming gets a blocking Send instead.
func (cn *Conn) Stream(ctx context.Context, msg *a2a.Message, onEvent func(a2a.Event)) (*a2a.Task, error) {
	if !cn.streaming {
		t, err := cn.Send(ctx, msg)
		if err == nil && onEvent != nil {
			onEvent(t)
		}
		return t, err
	}
	var f taskFolder
	for ev, err := range cn.client.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}) {
		if err != nil {
			return f.task, fmt.Errorf("stream: %w", err)
		}
		if err := f.apply(ev); err != nil {
			return f.task, err
		}
		if onEvent != nil {
			onEvent(ev)
		}
		if f.task != nil && settled(f.task.Status.State) {
			break
		}
	}
	if f.task == nil {
		return nil, errors.New("stream: the node sent no task")
	}
	return f.task, nil
}

// GetTask reads a task.
func (cn *Conn) GetTask(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	t, err := cn.client.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	return t, nil
}

// settled is a state in which the node waits for no more events: terminal, or
// waiting for the agent (auth or input).
func settled(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.TaskStateAuthRequired || s == a2a.TaskStateInputRequired
}

// pactAuth is the call interceptor that puts the PACT credentials in service
// params, which both HTTP bindings send as headers. Never in message metadata:
// A2A keeps metadata in the task history.
type pactAuth struct {
	a2aclient.PassthroughInterceptor
	identity IdentitySource
	activate bool // ask for the PACT extension in A2A-Extensions (the card declares it)

	mu         sync.Mutex
	delegation string
}

func (p *pactAuth) setDelegation(t string) {
	p.mu.Lock()
	p.delegation = t
	p.mu.Unlock()
}

func (p *pactAuth) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	tok, err := p.identity.IdentityToken(ctx)
	if err != nil {
		return ctx, nil, fmt.Errorf("identity token: %w", err)
	}
	if req.ServiceParams == nil {
		req.ServiceParams = a2aclient.ServiceParams{}
	}
	req.ServiceParams["authorization"] = []string{"Bearer " + tok}
	if p.activate {
		req.ServiceParams[strings.ToLower(a2a.SvcParamExtensions)] = []string{ExtensionURI}
	}
	key := strings.ToLower(DelegationHeader)
	delete(req.ServiceParams, key)
	p.mu.Lock()
	d := p.delegation
	p.mu.Unlock()
	if d != "" && (req.Method == "SendMessage" || req.Method == "SendStreamingMessage") {
		req.ServiceParams[key] = []string{d} // only a turn needs it
	}
	return ctx, nil, nil
}

// taskFolder builds a task from stream events.
type taskFolder struct{ task *a2a.Task }

func (f *taskFolder) apply(ev a2a.Event) error {
	switch e := ev.(type) {
	case *a2a.Task:
		t := *e
		f.task = &t
	case *a2a.Message:
		return fmt.Errorf("the node answered with a message, not a task: %q", messageText(e))
	case *a2a.TaskStatusUpdateEvent:
		f.ensure(e.TaskID, e.ContextID)
		f.task.Status = e.Status
		for k, v := range e.Metadata {
			f.task.SetMeta(k, v)
		}
	case *a2a.TaskArtifactUpdateEvent:
		if e.Artifact == nil {
			return nil
		}
		f.ensure(e.TaskID, e.ContextID)
		for i, a := range f.task.Artifacts {
			if a.ID != e.Artifact.ID {
				continue
			}
			if e.Append {
				merged := *a
				merged.Parts = append(append(a2a.ContentParts{}, a.Parts...), e.Artifact.Parts...)
				f.task.Artifacts[i] = &merged
			} else {
				f.task.Artifacts[i] = e.Artifact
			}
			return nil
		}
		f.task.Artifacts = append(f.task.Artifacts, e.Artifact)
	default:
		return fmt.Errorf("stream: unexpected event %T", ev)
	}
	return nil
}

func (f *taskFolder) ensure(id a2a.TaskID, contextID string) {
	if f.task == nil {
		f.task = &a2a.Task{ID: id, ContextID: contextID}
	}
}

// messageText joins a message's text parts.
func messageText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var parts []string
	for _, p := range m.Parts {
		if p == nil {
			continue
		}
		if t := p.Text(); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}
