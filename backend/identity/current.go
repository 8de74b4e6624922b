package identity

import (
	"context"
	"sync/atomic"
)

// Current verifies with a Verifier for settings that change: the node's publicUrl and audience
// follow its policy. Set builds a new Verifier only when the audience, the node's issuer or
// allowInsecureLocalIssuers change, so a reload that keeps them keeps the key cache.
type Current struct {
	v atomic.Pointer[Verifier]
}

// Set makes cfg's Verifier current unless the current one was built for the same settings.
func (c *Current) Set(cfg Config) {
	if old := c.v.Load(); old != nil && old.cfg.Audience == cfg.Audience && old.cfg.NodeIssuer == cfg.NodeIssuer &&
		old.cfg.AllowInsecureLocalIssuers == cfg.AllowInsecureLocalIssuers {
		return
	}
	c.v.Store(New(cfg))
}

// Verify verifies with the current Verifier (Verifier.Verify); Set must have been called.
func (c *Current) Verify(ctx context.Context, raw, clientIP string) (Identity, error) {
	return c.v.Load().Verify(ctx, raw, clientIP)
}
