package node

// DesktopState is what the desktop shell shows outside its window: the tray's
// Pause/Resume item and whether to open the Brands page at start.
type DesktopState struct {
	Brands      int   // brands in the served policy
	Running     bool  // the gateway serves (the policy loaded without errors)
	Paused      bool  // paused from the tray or the node API
	PolicyError error // the policy file's problem, if any
}

// DesktopState reports the gateway and policy state.
func (n *Node) DesktopState() DesktopState {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := DesktopState{Running: n.gw != nil && n.polErr == nil, PolicyError: n.polErr}
	if n.pol != nil && n.pol.Pact != nil {
		st.Brands = len(n.pol.Pact.Brands)
	}
	if n.gw != nil {
		st.Paused = n.gw.Paused()
	}
	return st
}
