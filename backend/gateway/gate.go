package gateway

import (
	"context"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/identity"
)

// call is what the gate lets a turn through with, for the executor. It travels
// on the context the gate returns, which a2a-go hands on to Execute (detached
// from the request's cancellation, values kept).
type call struct {
	agent      domain.Agent
	grant      domain.GrantID
	streaming  bool            // the turn streams its events
	watched    bool            // the agent sees the task while the turn runs (a stream, or returnImmediately)
	disconnect <-chan struct{} // closed when a streaming client goes away
}

type callKey struct{}

func withCall(ctx context.Context, c call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// callFrom is the zero call when the gate let none through: no grant, no turn.
func callFrom(ctx context.Context) call {
	c, _ := ctx.Value(callKey{}).(call)
	return c
}

// gate is the call interceptor of one brand. It sets the caller on the call,
// enforces A2A-Version, task ownership and terminal states, and answers a turn
// without a valid delegation itself with a stored TASK_STATE_AUTH_REQUIRED
// task, so that the executor only ever runs delegated turns (an executor that
// emits AUTH_REQUIRED locks the task in a2a-go v2.4.0).
type gate struct {
	a2asrv.PassthroughCallInterceptor
	g     *Gateway
	brand domain.BrandID
	urls  urls
	tasks taskstore.Store // the route's
	exec  *executor       // the route's: the gate runs a plain send's new task itself (answerPlain)
}

func (gt *gate) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	id, ok := agentFrom(ctx)
	if !ok {
		return ctx, nil, a2a.ErrUnauthenticated
	}
	cc.User = a2asrv.NewAuthenticatedUser(id.Key(), nil)
	if vals, ok := cc.ServiceParams().Get("a2a-version"); ok {
		for _, v := range vals {
			if v = strings.TrimSpace(v); v != "" && v != "1" && !strings.HasPrefix(v, "1.") {
				return ctx, nil, a2a.NewError(a2a.ErrVersionNotSupported, "this node speaks A2A 1.x; got "+quoteTrunc(v))
			}
		}
	}
	switch p := req.Payload.(type) {
	case *a2a.SendMessageRequest:
		return gt.beforeTurn(ctx, cc, id, p)
	case *a2a.SubscribeToTaskRequest:
		return gt.beforeSubscribe(ctx, id, p)
	case *a2a.CancelTaskRequest:
		if _, err := gt.ownTask(ctx, id, p.ID); err != nil {
			return ctx, nil, err
		}
	}
	return ctx, nil, nil
}

// ownTask loads a task the caller owns on this brand; anything else is
// TaskNotFound, so task ids are no existence oracle.
func (gt *gate) ownTask(ctx context.Context, id identity.Identity, tid a2a.TaskID) (a2a.TaskState, error) {
	owner, brand, state, err := gt.g.cfg.Tasks.TaskOwner(ctx, tid)
	if err != nil || owner != id.Key() || domain.BrandID(brand) != gt.brand {
		return "", a2a.ErrTaskNotFound
	}
	return state, nil
}

func (gt *gate) beforeSubscribe(ctx context.Context, id identity.Identity, p *a2a.SubscribeToTaskRequest) (context.Context, any, error) {
	state, err := gt.ownTask(ctx, id, p.ID)
	if err != nil {
		return ctx, nil, err
	}
	if state.Terminal() {
		return ctx, nil, a2a.NewError(a2a.ErrUnsupportedOperation, "the task is "+state.String()+": read it with GetTask")
	}
	if state == a2a.TaskStateAuthRequired && !gt.g.turns.Running(string(p.ID)) {
		// Nothing runs for an idle AUTH_REQUIRED task: answer its snapshot
		// rather than the SDK's TaskNotFound (or a stream that never ends).
		st, err := gt.tasks.Get(ctx, p.ID)
		if err != nil {
			return ctx, nil, a2a.ErrTaskNotFound
		}
		return ctx, st.Task, nil
	}
	return ctx, nil, nil
}

func (gt *gate) beforeTurn(ctx context.Context, cc *a2asrv.CallContext, id identity.Identity, p *a2a.SendMessageRequest) (context.Context, any, error) {
	if p.Message == nil || p.Message.ID == "" || len(p.Message.Parts) == 0 || p.Message.Role == "" {
		return ctx, nil, a2a.NewError(a2a.ErrInvalidParams, "a turn needs a message with an id, a role and at least one part")
	}
	var existing *taskstore.StoredTask
	if p.Message.TaskID != "" {
		state, err := gt.ownTask(ctx, id, p.Message.TaskID)
		if err != nil {
			return ctx, nil, err
		}
		if state.Terminal() {
			return ctx, nil, a2a.NewError(a2a.ErrUnsupportedOperation, "the task is "+state.String()+" and takes no more messages; start a new task")
		}
		if gt.g.turns.Running(string(p.Message.TaskID)) {
			return ctx, nil, a2a.NewError(a2a.ErrUnsupportedOperation, "a turn is already running on this task; wait for it or cancel it")
		}
		st, err := gt.tasks.Get(ctx, p.Message.TaskID)
		if err != nil {
			return ctx, nil, a2a.ErrTaskNotFound
		}
		existing = st
	}
	token := firstParam(cc, DelegationHeader)
	var d *consent.Delegation
	var derr error
	if token == "" {
		derr = &consent.DelegationError{Reason: consent.ReasonMissing, Detail: "no " + DelegationHeader + " header"}
	} else {
		d, derr = gt.g.cfg.Consent.CheckDelegation(ctx, token, id.Agent, gt.brand, gt.g.Policy())
	}
	if derr != nil {
		task, err := gt.authRequired(ctx, id, p.Message, existing, derr)
		if err != nil {
			return ctx, nil, err
		}
		return ctx, task, nil
	}
	c := call{agent: id.Agent, grant: d.GrantID}
	if cc.Method() == "SendStreamingMessage" {
		c.streaming, c.disconnect = true, ctx.Done()
	}
	c.watched = c.streaming || (p.Config != nil && p.Config.ReturnImmediately)
	if !c.watched && existing == nil {
		task, err := gt.exec.answerPlain(withCall(ctx, c), cc, p)
		if err != nil {
			return ctx, nil, err
		}
		return ctx, task, nil
	}
	return withCall(ctx, c), nil, nil
}

func firstParam(cc *a2asrv.CallContext, key string) string {
	vals, _ := cc.ServiceParams().Get(key)
	for _, v := range vals {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}
