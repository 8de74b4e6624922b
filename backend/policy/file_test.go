package policy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aether/aether/backend/domain"
)

// follower records what a File told its subscriber.
type follower struct {
	mu      sync.Mutex
	served  []Snapshot
	changed []Snapshot
	refuse  error // Serve's answer
}

func (f *follower) subscriber() Subscriber {
	return Subscriber{
		Serve: func(s Snapshot) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.refuse != nil {
				return f.refuse
			}
			f.served = append(f.served, s)
			return nil
		},
		Changed: func(s Snapshot) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.changed = append(f.changed, s)
		},
	}
}

func (f *follower) counts() (served, changed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.served), len(f.changed)
}

func openTestFile(t *testing.T, data string) (*File, *follower) {
	t.Helper()
	path := writePolicy(t, policyDir(t), data)
	f, err := OpenFile(FileConfig{Path: path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	fl := &follower{}
	f.Subscribe(fl.subscriber())
	return f, fl
}

// handEdit writes data over the file with a modification time of its own, as an editor would.
func handEdit(t *testing.T, f *File, data string, at time.Time) {
	t.Helper()
	if err := os.WriteFile(f.Path(), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(f.Path(), at, at); err != nil {
		t.Fatal(err)
	}
}

// TestFileHandEdits: a hand edit that breaks policy.json keeps the last good policy current
// and publishes the problem with its JSON path, without serving anything; fixing the file
// serves it again.
func TestFileHandEdits(t *testing.T) {
	f, fl := openTestFile(t, doc(goodBrand))
	first := f.Current()
	if first.Err != nil || first.Policy == nil || first.Hash != first.Policy.Hash() || first.ModTime.IsZero() {
		t.Fatalf("opened: %+v", first)
	}
	f.Reload() // unchanged: nothing to do
	if s, c := fl.counts(); s+c != 0 {
		t.Fatalf("a reload of an unchanged file told the subscriber (%d served, %d changed)", s, c)
	}

	handEdit(t, f, doc(brandWith(`"read_only"`, `"readonly"`)), time.Now().Add(time.Minute))
	f.Reload()
	broken := f.Current()
	var perr *Error
	if !errors.As(broken.Err, &perr) || perr.Problems[0].Path != "pact.brands[0].accessMode" {
		t.Fatalf("broken file's error: %v", broken.Err)
	}
	if broken.Policy != first.Policy || broken.Hash != first.Hash {
		t.Fatal("a broken file replaced the last good policy")
	}
	if s, c := fl.counts(); s != 0 || c != 1 {
		t.Fatalf("broken file: %d served, %d changed; want 0 and 1", s, c)
	}

	handEdit(t, f, doc(brandWith(`"Code review"`, `"Careful review"`)), time.Now().Add(2*time.Minute))
	f.Reload()
	fixed := f.Current()
	if fixed.Err != nil || fixed.Policy.Pact.Brands[0].Name != "Careful review" || fixed.Hash == first.Hash {
		t.Fatalf("fixed file: %+v", fixed)
	}
	if s, c := fl.counts(); s != 1 || c != 2 || fl.served[0].Policy != fixed.Policy {
		t.Fatalf("fixed file: %d served, %d changed; want 1 and 2", s, c)
	}
}

// TestFileSave: an invalid policy writes nothing and serves nothing; a valid one is on disk,
// served and current at once, and the poll does not take the save for a hand edit.
func TestFileSave(t *testing.T) {
	f, fl := openTestFile(t, doc(goodBrand))
	before := readFile(t, f.Path())
	bad := f.Current().Policy.Clone()
	bad.Pact.Brands[0].AccessMode = "readonly"
	_, err := f.Save(bad)
	var perr *Error
	if !errors.As(err, &perr) || perr.Problems[0].Path != "pact.brands[0].accessMode" {
		t.Fatalf("invalid save: %v", err)
	}
	if string(readFile(t, f.Path())) != string(before) {
		t.Fatal("an invalid save changed the file")
	}
	if s, c := fl.counts(); s+c != 0 {
		t.Fatalf("an invalid save told the subscriber (%d served, %d changed)", s, c)
	}

	good := f.Current().Policy.Clone()
	good.Pact.Brands[0].Name = "Saved"
	saved, err := f.Save(good)
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := Load(f.Path())
	if err != nil || onDisk.Pact.Brands[0].Name != "Saved" {
		t.Fatalf("on disk after the save: %v", err)
	}
	if cur := f.Current(); cur.Policy != saved.Policy || cur.Hash != onDisk.Hash() || cur.Err != nil {
		t.Fatalf("current after the save: %+v", cur)
	}
	f.Reload()
	if s, c := fl.counts(); s != 1 || c != 1 {
		t.Fatalf("save then poll: %d served, %d changed; want 1 and 1", s, c)
	}
}

// TestFileServeRefused: what the subscriber cannot serve does not become current, and the
// caller of Save gets why.
func TestFileServeRefused(t *testing.T) {
	f, fl := openTestFile(t, doc(goodBrand))
	first := f.Current()
	fl.refuse = errors.New("cannot serve")
	p := first.Policy.Clone()
	p.Pact.Brands[0].Name = "Refused"
	if _, err := f.Save(p); !errors.Is(err, fl.refuse) {
		t.Fatalf("save refused by Serve: %v", err)
	}
	if cur := f.Current(); cur.Policy != first.Policy || cur.Err != nil {
		t.Fatalf("current after a refused save: %+v", cur)
	}
}

// TestFileModify: edits go one at a time under the File's lock, so concurrent edits lose
// none of each other's changes; over a broken file Modify refuses before editing.
func TestFileModify(t *testing.T) {
	f, _ := openTestFile(t, doc(goodBrand))
	const edits = 6
	var wg sync.WaitGroup
	for i := range edits {
		wg.Go(func() {
			_, err := f.Modify(func(p *Policy) error {
				b := p.Pact.Brands[0]
				b.ID, b.Scope.ID = domain.BrandID(fmt.Sprintf("b%d", i)), fmt.Sprintf("b%d:read_only", i)
				p.Pact.Brands = append(p.Pact.Brands, b)
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
		wg.Go(f.Reload)
	}
	wg.Wait()
	onDisk, err := Load(f.Path())
	if err != nil || len(onDisk.Pact.Brands) != edits+1 || len(f.Current().Policy.Pact.Brands) != edits+1 {
		t.Fatalf("after %d concurrent edits: %v brands on disk (%v)", edits, onDisk, err)
	}

	handEdit(t, f, "{", time.Now().Add(time.Minute))
	f.Reload()
	called := false
	_, err = f.Modify(func(*Policy) error { called = true; return nil })
	if !errors.Is(err, ErrNotLoaded) || called {
		t.Fatalf("modify over a broken file: %v (edit called: %v)", err, called)
	}
}

// TestFileStarter: a first run writes the starter policy and serves it; an existing file is
// left as it is.
func TestFileStarter(t *testing.T) {
	path := policyDir(t) + "/policy.json"
	f, err := OpenFile(FileConfig{Path: path, Starter: Starter("127.0.0.1:0"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if cur := f.Current(); cur.Err != nil || cur.Policy == nil || len(cur.Policy.Pact.Brands) != 0 || cur.Policy.Pact.PublicURL != "http://127.0.0.1:8080" {
		t.Fatalf("starter: %+v", cur)
	}
	if got := Starter("127.0.0.1:9123").Pact.PublicURL; got != "http://127.0.0.1:9123" {
		t.Fatalf("the starter of a gateway on port 9123 has publicUrl %s", got)
	}
	noPact := writePolicy(t, policyDir(t), `{"scopes": []}`)
	f, err = OpenFile(FileConfig{Path: noPact, Starter: Starter("127.0.0.1:0"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if cur := f.Current(); cur.Err == nil || cur.Policy != nil {
		t.Fatalf("a file without a pact section: %+v", cur)
	}
}
