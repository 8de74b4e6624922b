// Package turn owns a delegated turn from its admission to the moment its answer may be
// shown: the grant's slots, the turn's record, Codex in the brand's workspace, the re-check
// that the grant still stands, the outcome and the signed receipt (docs/architecture.md,
// "A turn"). It speaks the node's own types; the gateway maps a turn's progress onto A2A.
package turn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/limit"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/receipts"
)

// Runner runs one coding-agent turn (codex.Runner in production).
type Runner interface {
	Run(ctx context.Context, req codex.Request, progress func(codex.Progress)) (codex.Result, error)
}

// Config is what the service needs; the node builds it.
type Config struct {
	Ledger  *receipts.Ledger
	Runner  Runner
	Consent *consent.Service
	// Served is the policy the node serves now (its policy.File's current one): a turn's brand
	// must still be offered there.
	Served    func() *policy.Policy
	Timeout   time.Duration
	OnReceipt func(*receipts.Receipt) // told after each receipt is durable
	// Models, if set, opens each turn's pass to the node's model gateway: Codex gets a
	// one-time token, and the receipt the gateway's count of tokens (docs/model-gateway.md).
	Models func(ModelTurn) (*ModelPass, error)
	Logger *slog.Logger
}

// MaxPerGrant caps the turns of one grant that run or wait for a workspace at once: no agent
// fills the queue that other agents' turns wait in (W14).
const MaxPerGrant = 4

// Service runs delegated turns.
type Service struct {
	cfg     Config
	grants  *limit.Slots
	mu      sync.Mutex
	running map[string]*running // by task id
}

// New makes the service.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Minute
	}
	return &Service{cfg: cfg, grants: limit.NewSlots(MaxPerGrant), running: map[string]*running{}}
}

// Request is one turn the agent asked for, as the gateway admitted it.
type Request struct {
	TaskID, ContextID string
	Brand             policy.Brand
	Policy            *policy.Policy // the snapshot the turn runs on (P11)
	PolicyHash        string
	Grant             domain.GrantID
	Agent             domain.Agent
	RequestHash       string   // receipts.HashJSON of the agent's message
	Texts             []string // what the agent asked
	ThreadID          string   // the Codex thread the turn continues, if any
	// Disconnect is closed when the agent stops watching a streamed turn: the turn is canceled.
	Disconnect <-chan struct{}
	// Keep, when set, gives the task to store, finished, in the receipt's own commit (a plain
	// send's new task, docs/wire.md "Plain send"); nil from it stores none there.
	Keep func(domain.Outcome) *receipts.NewTask
}

// Watcher follows a turn while it runs; false from either means nobody can see the turn.
type Watcher interface {
	Started() bool            // the turn holds its task: a Cancel now finds it
	Working(text string) bool // a status on the way
}

// Finished is a turn's end: its outcome and receipt. Nothing of them may be shown before
// Durable has returned nil (docs/threats.md T8).
type Finished struct {
	domain.Outcome
	Receipt *receipts.Receipt
	Kept    bool                         // Request.Keep's task went into the receipt's commit
	ByAgent bool                         // Cancel ended it at the agent's request: the cancel shows the receipt
	pending interface{ Durable() error } // the receipt's commit, when still under way (Kept)
}

// Durable returns once the receipt (and a kept task) is durable, or why it is not.
func (f *Finished) Durable() error {
	if f.pending == nil {
		return nil
	}
	return f.pending.Durable()
}

// Refusal is a turn refused, or failed, with a text for the agent.
type Refusal struct{ Text string }

func (r *Refusal) Error() string { return r.Text }

var (
	// ErrRunning: a turn is already running on the task.
	ErrRunning = errors.New("a turn is already running on this task")
	// ErrUnwatched: nobody could see the turn start; it ended without running Codex.
	ErrUnwatched = errors.New("the turn's task could not be updated")
)

var (
	errCanceledByAgent = errors.New("canceled by the agent (CancelTask)")
	errDisconnected    = errors.New("the streaming client disconnected")
	errShutdown        = errors.New(receipts.ReasonNodeStopped)
)

// ReasonRevoked is the receipt's reason for a turn whose grant was revoked while it waited:
// consent's word for a revoked grant.
const ReasonRevoked = consent.ReasonRevoked

var errRevokedWhileQueued = errors.New(ReasonRevoked)

// running is one turn in progress.
type running struct {
	ctx     context.Context // canceled by Cancel, Shutdown, a disconnect
	cancel  context.CancelCauseFunc
	tidy    chan struct{} // closed once the receipt is durable (codex.Request.Tidy)
	done    chan struct{}
	receipt *receipts.Receipt // set before done closes
}

// Run runs the turn. It returns once its receipt is written: Finished.Durable says when it
// may be shown. A Refusal comes back before any work, or when no receipt could be written.
func (s *Service) Run(ctx context.Context, req Request, w Watcher) (*Finished, error) {
	if req.Grant == "" {
		// The gateway lets no turn through without a delegation; refuse loudly if one gets here.
		return nil, &Refusal{"no delegation on this turn"}
	}
	if !s.grants.Take(string(req.Grant)) {
		return nil, &Refusal{fmt.Sprintf("too many turns of this grant are running or waiting (at most %d at once); retry when one has finished", MaxPerGrant)}
	}
	r := s.add(ctx, req.TaskID)
	if r == nil {
		s.grants.Release(string(req.Grant))
		return nil, ErrRunning
	}
	fin, err := s.run(ctx, r, req, w)
	if fin == nil || fin.pending == nil {
		s.end(r, req, fin, nil)
		return fin, err
	}
	go func() { s.end(r, req, fin, fin.Durable()) }()
	return fin, err
}

// end lets go of a turn once its receipt is durable (durErr nil) or failed.
func (s *Service) end(r *running, req Request, fin *Finished, durErr error) {
	switch {
	case durErr != nil:
		s.cfg.Logger.Error("receipt not committed", "task", req.TaskID, "err", durErr)
	case fin != nil && fin.Receipt != nil:
		r.receipt = fin.Receipt
		if s.cfg.OnReceipt != nil {
			s.cfg.OnReceipt(fin.Receipt)
		}
	}
	close(r.tidy)
	s.mu.Lock()
	delete(s.running, req.TaskID)
	s.mu.Unlock()
	close(r.done)
	r.cancel(nil)
	s.grants.Release(string(req.Grant))
}

// add registers a turn on the task, detached from the request: a client that goes away does
// not stop it (a disconnect from a stream does, by Request.Disconnect).
func (s *Service) add(ctx context.Context, taskID string) *running {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[taskID] != nil {
		return nil
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	r := &running{ctx: ctx, cancel: cancel, tidy: make(chan struct{}), done: make(chan struct{})}
	s.running[taskID] = r
	return r
}

// Running reports whether a turn runs on the task.
func (s *Service) Running(taskID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[taskID] != nil
}

// Cancel stops the turn running on the task, if any (Codex gets SIGTERM, then SIGKILL), and
// returns its receipt once it has ended; nil when no turn ran, or it left no receipt.
func (s *Service) Cancel(ctx context.Context, taskID string) (*receipts.Receipt, error) {
	s.mu.Lock()
	r := s.running[taskID]
	s.mu.Unlock()
	if r == nil {
		return nil, nil
	}
	r.cancel(errCanceledByAgent)
	select {
	case <-r.done:
		return r.receipt, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Shutdown stops every running turn (each ends FAILED with a receipt) and waits until each
// has ended, or ctx ends.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	all := make([]*running, 0, len(s.running))
	for _, r := range s.running {
		all = append(all, r)
	}
	s.mu.Unlock()
	for _, r := range all {
		r.cancel(errShutdown)
	}
	for _, r := range all {
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
