//go:build !linux

package confine

import (
	"context"
	"fmt"
	"runtime"
)

// Wrap refuses: this system has no confinement yet (docs/confinement.md).
func (s *Sandbox) Wrap(View, []string) (string, []string, error) {
	return "", nil, fmt.Errorf("%w: %s", ErrUnavailable, unsupported())
}

func (s *Sandbox) probe(context.Context) Status { return Status{Reason: unsupported()} }

func unsupported() string {
	return fmt.Sprintf("Aether cannot confine Codex on %s yet, so it runs no turn here; run the node on Linux with bubblewrap", runtime.GOOS)
}
