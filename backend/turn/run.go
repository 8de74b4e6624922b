package turn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/receipts"
)

// run is the turn from its start to its written receipt.
func (s *Service) run(ctx context.Context, r *running, req Request, w Watcher) (*Finished, error) {
	if !w.Started() {
		return nil, ErrUnwatched
	}
	if req.Disconnect != nil {
		go func() {
			select {
			case <-req.Disconnect:
				r.cancel(errDisconnected)
			case <-r.ctx.Done():
			}
		}()
	}
	base := receipts.Turn{
		ID: newID("t_"), TaskID: req.TaskID, ContextID: req.ContextID, Brand: req.Brand.ID, BrandScope: req.Brand.Scope.ID,
		GrantID: req.Grant, Agent: req.Agent, PolicyHash: req.PolicyHash, RequestHash: req.RequestHash,
		StartedAt: time.Now().UTC(),
	}
	// The turn record is written by Admit, while bwrap makes the turn's view; Codex starts
	// only once it is durable (T8). A turn that ends before Admit, none of its work started,
	// is recorded in its receipt's own commit (receipts.Turn.Unstarted).
	var admitted atomic.Bool
	recorded := sync.OnceValue(func() error { return s.cfg.Ledger.Start(ctx, base) })
	if !w.Working("Codex is working on it in " + req.Brand.Name + " (" + string(req.Brand.AccessMode) + ").") {
		return nil, s.unwatched(ctx, base)
	}
	res := s.codex(r, req, base, func() error { admitted.Store(true); return recorded() }, w)
	end := base
	if !admitted.Load() {
		end.Unstarted = true
	} else if err := recorded(); err != nil {
		return nil, fmt.Errorf("record turn: %w", err) // Codex did not start (Admit)
	}
	out := outcome(r.ctx, res)
	end.AnswerHash = receipts.HashBytes([]byte(res.Answer))
	end.Status, end.Reason, end.ExitCode, end.EndedAt = out.Status, out.Reason, res.ExitCode, time.Now().UTC()
	end.Usage = out.Usage
	end.Violation = res.Status == codex.StatusViolation
	end.Work = res.Work
	return s.receipt(ctx, r, req, end, out)
}

// unwatched closes a turn nobody can see (the SDK stopped the execution) with a receipt,
// rather than leave it running until a restart.
func (s *Service) unwatched(ctx context.Context, base receipts.Turn) error {
	end := base
	end.Unstarted = true
	end.Status, end.Reason, end.ExitCode, end.EndedAt = domain.TurnFailed, "the task could not be updated; codex did not run", -1, time.Now().UTC()
	end.AnswerHash = receipts.HashBytes(nil)
	if _, err := s.cfg.Ledger.Append(context.WithoutCancel(ctx), end); err != nil {
		s.cfg.Logger.Error("receipt not committed", "task", base.TaskID, "err", err)
	}
	return ErrUnwatched
}

// receipt writes the turn's receipt. A revoke during the turn lets it finish: the ledger
// reads the grant in the receipt's commit and marks the receipt (V2). A plain send's task
// goes into that commit (Request.Keep), and the turn returns as soon as it is written there,
// before the commit is durable; the answer is made meanwhile and waits for Durable.
func (s *Service) receipt(ctx context.Context, r *running, req Request, end receipts.Turn, out domain.Outcome) (*Finished, error) {
	ctx = context.WithoutCancel(ctx)
	fin := &Finished{Outcome: out, ByAgent: errors.Is(context.Cause(r.ctx), errCanceledByAgent)}
	if req.Keep != nil && !fin.ByAgent {
		if task := req.Keep(out); task != nil {
			rec, pending, err := s.cfg.Ledger.AppendCreatingTask(ctx, end, req.Brand.ID, task.Owner, task.Build)
			if err == nil {
				fin.Receipt, fin.Kept, fin.pending = rec, true, pending
				return fin, nil
			}
			s.cfg.Logger.Warn("receipt and task not committed together; appending the receipt alone", "task", req.TaskID, "err", err)
		}
	}
	rec, err := s.cfg.Ledger.Append(ctx, end)
	if err != nil {
		// No receipt, no answer: the turn fails rather than answer unrecorded.
		s.cfg.Logger.Error("receipt not committed", "task", req.TaskID, "err", err)
		return nil, &Refusal{"the node could not record a receipt for this turn"}
	}
	fin.Receipt = rec
	return fin, nil
}

// codex runs the coding agent, relaying its progress. It starts only once recorded (the
// turn's record) and the grant's standing both hold.
func (s *Service) codex(r *running, req Request, turn receipts.Turn, recorded func() error, w Watcher) codex.Result {
	creq := codex.Request{
		AccessMode: req.Brand.AccessMode,
		Prompt:     codex.BuildPrompt(req.Brand.InstructionText(), req.Texts),
		ThreadID:   req.ThreadID,
		// Codex's sessions are kept per agent and brand: a thread resumes only for them.
		Conversation: turn.Agent.Issuer + "\x00" + turn.Agent.Subject + "\x00" + string(req.Brand.ID),
		Admit: func(ctx context.Context) error {
			if err := recorded(); err != nil {
				return fmt.Errorf("record turn: %w", err)
			}
			return s.admit(ctx, turn.GrantID, req.Brand.ID)
		},
		// The turn's folders are tidied once its receipt is durable (end).
		Tidy: r.tidy,
	}
	progress := make(chan string, 16)
	resc := make(chan codex.Result, 1)
	deadline := time.Now().Add(s.cfg.Timeout)
	timeout, cancelTimeout := context.WithDeadline(r.ctx, deadline)
	defer cancelTimeout()
	pass, err := s.openModel(r.ctx, req, turn, deadline)
	if err != nil {
		return codex.Result{Status: codex.StatusFailed, Reason: err.Error(), ExitCode: -1}
	}
	go func() { resc <- s.runModelTurn(timeout, req, creq, pass, progress) }()
	for {
		select {
		case text := <-progress:
			if !w.Working(text) {
				// Nobody sees the turn any more; let Codex finish and keep its receipt.
				return <-resc
			}
		case res := <-resc:
			return res
		}
	}
}

// runModelTurn runs Codex with the turn's pass to the model gateway, if any: the gateway
// ending the pass ends the turn, and the turn's end kills the pass's token.
func (s *Service) runModelTurn(ctx context.Context, req Request, creq codex.Request, pass *ModelPass, progress chan<- string) codex.Result {
	if pass == nil {
		return s.runCodex(ctx, req, creq, progress)
	}
	creq.Provider = &pass.Provider
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := watchModel(pass, cancel)
	res := s.runCodex(ctx, req, creq, progress)
	stop()
	closeModel(pass, &res)
	return res
}

// runCodex resolves the workspace again at turn start — it must still be the folder the
// policy named, not a symlink swapped in since (P7) — and runs Codex there; the runner checks
// it once more after the turn's wait for it, and binds the folder it checked (W25).
func (s *Service) runCodex(ctx context.Context, req Request, creq codex.Request, progress chan<- string) codex.Result {
	dir, err := req.Policy.RecheckWorkspace(req.Brand.ID)
	if err != nil {
		return codex.Result{Status: codex.StatusFailed, Reason: err.Error()}
	}
	creq.Workspace = dir
	res, err := s.cfg.Runner.Run(ctx, creq, func(p codex.Progress) {
		select {
		case progress <- p.Text:
		default: // a slow consumer drops progress, never the turn
		}
	})
	if err != nil && res.Reason == "" {
		res.Status, res.Reason = codex.StatusFailed, err.Error()
	}
	if errors.Is(err, errRevokedWhileQueued) {
		res.Reason = ReasonRevoked
	}
	return res
}

// admit runs once a turn holds its workspace, right before Codex starts: the grant must
// still stand and the brand still be offered, however long the turn waited (W13).
func (s *Service) admit(ctx context.Context, grantID domain.GrantID, brandID domain.BrandID) error {
	served := s.cfg.Served()
	if _, ok := served.Brand(brandID); !ok {
		return errors.New("the brand " + quoteTrunc(string(brandID)) + " is no longer offered by this node")
	}
	err := s.cfg.Consent.GrantStands(ctx, grantID, brandID, served)
	var de *consent.DelegationError
	if errors.As(err, &de) && de.Reason == consent.ReasonRevoked {
		return errRevokedWhileQueued
	}
	return err
}

// outcome is how the turn ended, from why its context ended and what Codex returned.
func outcome(runCtx context.Context, res codex.Result) domain.Outcome {
	out := domain.Outcome{Status: domain.TurnFailed, Answer: res.Answer, ThreadID: res.ThreadID,
		Usage: res.Usage}
	cause := context.Cause(runCtx)
	switch {
	case errors.Is(cause, errShutdown):
		out.Reason = errShutdown.Error()
	case cause != nil && !errors.Is(cause, context.Canceled):
		out.Status, out.Reason = domain.TurnCanceled, cause.Error()
	case res.Status == codex.StatusCompleted && res.Answer != "":
		out.Status = domain.TurnCompleted
	case res.Reason == ReasonRevoked:
		out.Reason = ReasonRevoked
	case res.Status == codex.StatusViolation && res.Reason == "":
		out.Reason = "the turn broke its brand's access mode"
	case res.Reason == "":
		out.Reason = "codex finished without an answer"
	default:
		out.Reason = res.Reason
	}
	return out
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func quoteTrunc(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + s + `"`
}
