// Package confine runs a process tree inside a filesystem view of its own: only the paths a
// View names exist for it (read-only unless marked writable), beside the system's programs
// and libraries, with its own process, IPC and user namespaces. Nothing else of the host is
// there to read: not the owner's home, not the node's data dir, not other processes.
//
// On Linux the view is built by bubblewrap; other systems have no confinement yet, and a
// caller must refuse to run what it would have confined. Why bubblewrap: docs/confinement.md.
package confine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// Mount puts one host path into the view.
type Mount struct {
	Source   string // host path (file or directory); must exist
	Target   string // path inside the view; "" = Source
	Writable bool   // read-only unless set
	// FD, when above 0, is a descriptor (cmd.ExtraFiles[FD-3]) of Source that the caller
	// opened and checked: the view binds it, whatever Source names by the time bwrap runs.
	FD int
}

// View is what a confined process sees besides the system (see systemMounts).
type View struct {
	Mounts []Mount // in order: a later mount may sit inside an earlier one
	Dir    string  // working directory inside the view
	// InfoFD, when above 0, is a descriptor the caller passes to bwrap (cmd.ExtraFiles[InfoFD-3]):
	// bwrap writes the view's first process there once it exists (ReadSandboxPID), so the caller
	// can end the view itself, also when bwrap is gone (it starts the view in a session of its own).
	InfoFD int
	// BlockFD, when above 0, is a descriptor (cmd.ExtraFiles[BlockFD-3]) that bwrap reads one
	// byte from once the view is made, before the command starts: the caller lets the command
	// start by writing it. Any end of the descriptor also lets it start, so a caller that will
	// not must end the view first (the end of bwrap's first process ends it).
	BlockFD int
}

// ReadSandboxPID reads the PID of a view's first process (its PID 1, whose end the kernel
// makes the end of everything in the view) from bwrap's --info-fd: a JSON object that has
// "child-pid". It returns an error when bwrap closed the descriptor without writing one.
func ReadSandboxPID(r io.Reader) (int, error) {
	var info struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(r).Decode(&info); err != nil {
		return 0, fmt.Errorf("confine: no sandbox info from bwrap: %w", err)
	}
	if info.ChildPID <= 0 {
		return 0, errors.New("confine: bwrap's sandbox info has no child-pid")
	}
	return info.ChildPID, nil
}

// Status says whether confinement can be set up here, and if not, why and how to fix it.
type Status struct {
	Available bool
	Mechanism string // e.g. "bubblewrap 0.8.0"
	Reason    string // when not available: what is missing and how to get it
}

// Text is the one line the Status page, `aether status` and the log show.
func (s Status) Text() string {
	if !s.Available && s.Reason == "" {
		return "Confinement: not checked yet"
	}
	if !s.Available {
		return "Confinement: unavailable — " + s.Reason
	}
	return "Confinement: " + s.Mechanism + " — each turn sees only its brand's workspace"
}

// ErrUnavailable wraps Status.Reason when a caller asks to confine where it cannot.
var ErrUnavailable = errors.New("confinement unavailable")

// Sandbox confines commands. The zero value looks for bwrap on PATH.
type Sandbox struct {
	Path string // the bubblewrap binary; default "bwrap" on PATH
	// Mark, when set, is an argument the probe's command gets, and ignores: bwrap shows it on
	// its command line, so that a probe whose caller was killed can be found (a view bwrap had
	// not yet let go on waits forever).
	Mark string

	mu sync.Mutex
	ok *Status // the last successful check; a failed one is retried on the next call

	found atomic.Pointer[string] // Path as found on PATH, once it was
}

// Check tries to set up an empty view and run a program in it. A success is remembered;
// a failure is not, so installing bubblewrap or enabling user namespaces takes effect on
// the next turn.
func (s *Sandbox) Check(ctx context.Context) Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ok != nil {
		return *s.ok
	}
	st := s.probe(ctx)
	if st.Available {
		s.ok = &st
	}
	return st
}
