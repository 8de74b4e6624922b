//go:build !linux

package codex

// sandbox: without confinement on this system no turn runs (confine refuses), so there is
// no view to stop.
type sandbox struct{}

func openSandbox(int) *sandbox { return nil }

func (*sandbox) interrupt() {}
func (*sandbox) kill()      {}
func (*sandbox) close()     {}
