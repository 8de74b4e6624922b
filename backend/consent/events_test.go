package consent

import (
	"testing"
)

func TestEvents(t *testing.T) {
	f := newFixture(t)
	events, stop := f.svc.Subscribe()
	fs := f.start(alice, "review:read_only", "")
	e := next(t, events)
	if e.Kind != EventRequestAdded || e.Agent != alice || e.Brand != "review" || e.Request == nil || e.Request.UserCode != fs.UserCode {
		t.Errorf("added = %+v", e)
	}
	dec := f.decide(fs, true, "")
	e = next(t, events)
	if e.Kind != EventRequestDecided || e.Outcome != OutcomeAllowed || e.Grant == nil || e.Grant.ID != dec.Grant.ID || e.Request.ID != dec.Request.ID {
		t.Errorf("decided = %+v", e)
	}
	stop()
	stop() // idempotent
	if _, ok := <-events; ok {
		t.Error("channel open after stop")
	}
}

func TestSlowSubscriberNeverBlocks(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxPendingPerAgent, c.MaxPendingPerSite, c.NewFlowBurst = 1000, 1000, 1000 })
	slow, stopSlow := f.svc.Subscribe() // never read
	defer stopSlow()
	live, stopLive := f.svc.Subscribe()
	defer stopLive()
	for range subscriberBuffer + 10 {
		f.start(alice, "review:read_only", "")
		next(t, live)
	}
	if len(slow) != subscriberBuffer {
		t.Errorf("slow subscriber holds %d events, want its buffer of %d", len(slow), subscriberBuffer)
	}
}
