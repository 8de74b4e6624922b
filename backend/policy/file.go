package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNotLoaded is what Modify answers while the file does not load: the owner edits the file
// by hand first, never a guessed policy.
var ErrNotLoaded = errors.New("policy.json has errors")

// Snapshot is the policy file's state at one moment. It is never changed once published.
type Snapshot struct {
	Policy  *Policy   // the last good policy, with a pact section; nil before one loaded
	Hash    string    // Policy.Hash(); "" with no Policy
	ModTime time.Time // the file's modification time when it was last read
	// Err is why the file, as it is now, does not load (what and where: an *Error lists each
	// problem with its JSON path); Policy stays the last good one. nil when the file is Policy.
	Err error
}

// Snapshot is p as the file would publish it, with its hash (tests, and a gateway built on a
// policy of its own).
func (p *Policy) Snapshot() Snapshot { return Snapshot{Policy: p, Hash: p.Hash()} }

// Subscriber follows a File (Syncthing's config Committer is the model). Both are called under
// the File's lock, so changes reach them one at a time and in order.
type Subscriber struct {
	// Serve makes next.Policy the served one, before next is published; an error refuses it (the
	// last good policy stays current, and Save returns the error). Not called for a change that
	// is only a new problem with the file.
	Serve func(next Snapshot) error
	// Changed is told once next is published: a new policy, or a new problem with the file.
	Changed func(next Snapshot)
}

// FileConfig is the file a File owns and how it checks it.
type FileConfig struct {
	Path    string  // the policy file
	Limits  Limits  // what every workspace keeps clear of besides the file (the node's data dir)
	Starter *Policy // written when Path does not exist; nil writes nothing
	Logger  *slog.Logger
}

// File is the one owner of the node's policy.json: its path, the last good policy and its
// hash, the file's modification time, why it does not load, saving, and noticing hand edits.
// Loads, saves and the subscribers' calls happen under one lock (mu); readers take the current
// Snapshot without it (docs/architecture.md, "The served policy").
type File struct {
	path string
	lim  Limits
	log  *slog.Logger

	mu   sync.Mutex // one change at a time: load, save, Serve and Changed
	subs []Subscriber
	cur  atomic.Pointer[Snapshot] // written under mu
}

// OpenFile reads the policy file, writing cfg.Starter first when there is none. A file that
// does not load is not an error here: Current().Err says why, and no policy is guessed. The
// error is for a starter policy that could not be written.
func OpenFile(cfg FileConfig) (*File, error) {
	f := &File{path: cfg.Path, lim: cfg.Limits, log: cfg.Logger}
	if f.log == nil {
		f.log = slog.Default()
	}
	if _, err := os.Stat(f.path); errors.Is(err, os.ErrNotExist) && cfg.Starter != nil {
		if err := Save(f.path, cfg.Starter); err != nil {
			return nil, fmt.Errorf("write a starter policy: %w", err)
		}
		f.log.Info("wrote a starter policy with no brands; add one on the Brands page", "path", f.path)
	}
	next := f.read(Snapshot{})
	f.cur.Store(&next)
	return f, nil
}

// Path is the policy file.
func (f *File) Path() string { return f.path }

// Current is the file's state now.
func (f *File) Current() Snapshot { return *f.cur.Load() }

// Subscribe has s follow every later change.
func (f *File) Subscribe(s Subscriber) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs = append(f.subs, s)
}

// read loads the file into a snapshot that keeps prev's policy when the file does not load.
func (f *File) read(prev Snapshot) Snapshot {
	next := Snapshot{Policy: prev.Policy, Hash: prev.Hash}
	if fi, err := os.Stat(f.path); err == nil {
		next.ModTime = fi.ModTime()
	}
	p, err := f.lim.Load(f.path)
	if err == nil && p.Pact == nil {
		err = fmt.Errorf("%s has no \"pact\" section: add one (see examples/policy.json)", f.path)
	}
	if next.Err = err; err == nil {
		next.Policy, next.Hash = p, p.Hash()
	}
	return next
}

// publish serves next (unless it is only a problem) and makes it current; f.mu is held.
func (f *File) publish(next Snapshot) error {
	if next.Err == nil {
		for _, s := range f.subs {
			if s.Serve == nil {
				continue
			}
			if err := s.Serve(next); err != nil {
				return err
			}
		}
	}
	f.note(next)
	return nil
}

// Reload reads the file again if its modification time changed (a hand edit). A file that no
// longer loads keeps the last good policy and publishes the problem.
func (f *File) Reload() {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := f.Current()
	fi, err := os.Stat(f.path)
	if err != nil || fi.ModTime().Equal(prev.ModTime) {
		return
	}
	next := f.read(prev)
	if next.Err != nil {
		f.log.Error("policy.json has errors: the gateway stops serving until it is fixed", "path", f.path, "err", next.Err)
		f.note(next)
		return
	}
	if err := f.publish(next); err != nil {
		f.log.Error("policy reload failed", "err", err)
		// What Serve refused is not served; the file's time is noted so it is not retried.
		kept := prev
		kept.ModTime = next.ModTime
		f.note(kept)
		return
	}
	f.log.Info("policy reloaded", "path", f.path, "brands", len(next.Policy.Pact.Brands))
}

// note publishes a snapshot whose policy is the one served already; f.mu is held.
func (f *File) note(next Snapshot) {
	f.cur.Store(&next)
	for _, s := range f.subs {
		if s.Changed != nil {
			s.Changed(next)
		}
	}
}

// Watch calls Reload every d until ctx ends: a cheap stat of the file each time.
func (f *File) Watch(ctx context.Context, d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.Reload()
		}
	}
}

// Modify edits a copy of the current policy with edit, then saves it as Save does, all under
// the File's lock: a hand edit or another save cannot come in between. While the file does not
// load it answers an error wrapping ErrNotLoaded; an error of edit is returned as is.
func (f *File) Modify(edit func(p *Policy) error) (Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.Current()
	if cur.Err != nil || cur.Policy == nil {
		return Snapshot{}, fmt.Errorf("%w; fix the file first (the problems are listed above)", ErrNotLoaded)
	}
	p := cur.Policy.Clone()
	if err := edit(p); err != nil {
		return Snapshot{}, err
	}
	return f.save(p)
}

// Save checks p, writes it atomically (Save, the package function: the sections Aether does
// not manage are kept), reads the file back and serves what it says. An invalid p writes
// nothing and answers the *Error of Save.
func (f *File) Save(p *Policy) (Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.save(p)
}

func (f *File) save(p *Policy) (Snapshot, error) {
	if err := Save(f.path, p); err != nil {
		return Snapshot{}, err
	}
	next := f.read(f.Current())
	if next.Err != nil {
		return Snapshot{}, fmt.Errorf("re-read %s after saving: %w", f.path, next.Err)
	}
	if err := f.publish(next); err != nil {
		kept := f.Current()
		kept.ModTime = next.ModTime // written: not a hand edit to reload
		f.cur.Store(&kept)
		return Snapshot{}, err
	}
	return next, nil
}
