package consent

import "context"

const deniedReason = "The node owner denied this agent's request."

// EndWaitingTasks ends an agent's waiting AUTH_REQUIRED tasks on a brand as REJECTED when the
// owner denies its request or the request expires, until ctx ends: an agent polling such a task
// learns the answer without starting a new device flow. The node runs it in the background.
func (s *Service) EndWaitingTasks(ctx context.Context) {
	s.Watch(ctx, func(ev Event) {
		var reason string
		switch {
		case ev.Kind == EventRequestDecided && ev.Outcome == OutcomeDenied:
			reason = deniedReason
		case ev.Kind == EventRequestExpired:
			reason = "The consent request expired before the owner decided (" + ev.Outcome + ")."
		default:
			return
		}
		ids, err := s.db.RejectAuthRequired(ctx, ev.Agent.Key(), ev.Brand, reason)
		if err != nil {
			s.log.Warn("could not end waiting tasks", "brand", ev.Brand, "err", err)
		} else if len(ids) > 0 {
			s.log.Info("waiting tasks rejected", "brand", ev.Brand, "tasks", len(ids), "outcome", ev.Outcome)
		}
	})
}
