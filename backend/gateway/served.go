package gateway

import "github.com/aether/aether/backend/policy"

// Policy is the policy the gateway serves: the snapshot its routes were built from, swapped
// with them in one store by Reload. The node has consent and the owner read it from here, so
// that no one sees other brands than the gateway serves (docs/architecture.md).
func (g *Gateway) Policy() *policy.Policy { return g.routes.Load().policy }
