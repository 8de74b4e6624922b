package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/codexget"
	"github.com/aether/aether/backend/model"
	"github.com/aether/aether/backend/owner"
)

// codexSetup is the node's owner.CodexSetup: the pinned Codex got into <data dir>/codex-bin,
// and the model settings in the data dir (backend/model). The runner asks it for its binary
// (find) and its model (upstream) at every check and turn.
type codexSetup struct {
	n      *Node
	getter *codexget.Getter
	store  *model.Store

	mu    sync.Mutex
	dl    owner.CodexDownload
	check *owner.ModelCheck // the last Check, forgotten when a setting changes
}

func newCodexSetup(n *Node, registry string) *codexSetup {
	cs := &codexSetup{n: n, store: &model.Store{Dir: n.dataDir},
		getter: &codexget.Getter{Dir: n.path(dirCodexBin), Registry: registry}}
	cs.dl = owner.CodexDownload{Version: codexget.Version, State: owner.DownloadIdle}
	p, err := codexget.ForThisMachine()
	switch {
	case err != nil:
		cs.dl.State, cs.dl.Error = owner.DownloadUnavailable, err.Error()
	default:
		cs.dl.Package, cs.dl.Total = p.Package(), p.Size
		if bin := cs.getter.Binary(); bin != "" {
			cs.dl.State, cs.dl.Path, cs.dl.Done = owner.DownloadInstalled, bin, p.Size
		}
	}
	return cs
}

// find is the runner's codex when no --codex or AETHER_CODEX names one: the Codex the owner
// named in the window, else the one Aether got, else "" (codex on PATH).
func (cs *codexSetup) find() string {
	if st, err := cs.store.Settings(); err == nil && st.CodexPath != "" {
		return st.CodexPath
	}
	return cs.getter.Binary()
}

// upstream is the runner's model as the window set it.
func (cs *codexSetup) upstream() (codex.Upstream, error) {
	st, err := cs.store.Settings()
	if err != nil {
		return codex.Upstream{}, err
	}
	key, err := cs.store.Key()
	if err != nil {
		return codex.Upstream{}, err
	}
	return codex.Upstream{Key: key, BaseURL: st.BaseURL, Model: st.Model}, nil
}

// GetCodex starts the download unless one runs or Codex is there.
func (cs *codexSetup) GetCodex() error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	switch cs.dl.State {
	case owner.DownloadRunning, owner.DownloadInstalled:
		return nil
	case owner.DownloadUnavailable:
		return fmt.Errorf("%w: %s", owner.ErrInvalid, cs.dl.Error)
	}
	cs.dl.State, cs.dl.Done, cs.dl.Error = owner.DownloadRunning, 0, ""
	cs.n.bg.Add(1)
	go cs.download()
	return nil
}

// download gets Codex, then checks it again so the Status page shows it at once. It stops
// with the node.
func (cs *codexSetup) download() {
	defer cs.n.bg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := context.AfterFunc(cs.n.bgCtx, cancel)
	defer stop()
	bin, err := cs.getter.Get(ctx, func(p codexget.Progress) {
		cs.mu.Lock()
		cs.dl.Done, cs.dl.Total = p.Done, p.Total
		cs.mu.Unlock()
	})
	cs.mu.Lock()
	if err != nil {
		cs.dl.State, cs.dl.Error = owner.DownloadFailed, err.Error()
	} else {
		cs.dl.State, cs.dl.Path, cs.check = owner.DownloadInstalled, bin, nil
	}
	cs.mu.Unlock()
	if err != nil {
		cs.n.log.Warn("Get Codex failed", "package", cs.dl.Package, "err", err)
		return
	}
	cs.n.log.Info("Get Codex: installed", "path", bin)
	cs.n.checkCodex(ctx)
}

func (cs *codexSetup) CodexDownload() owner.CodexDownload {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.dl
}

// UseCodex names a Codex the owner installed: it must be an executable file.
func (cs *codexSetup) UseCodex(path string) error {
	if path != "" {
		path = filepath.Clean(path)
		st, err := os.Stat(path)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("%w: %s is not an executable file", owner.ErrInvalid, path)
		}
	}
	if _, err := cs.store.Update(func(s *model.Settings) { s.CodexPath = path }); err != nil {
		return invalid(err)
	}
	cs.changed()
	return nil
}

func (cs *codexSetup) Model() (owner.ModelStatus, error) {
	st, err := cs.store.Settings()
	if err != nil {
		return owner.ModelStatus{}, err
	}
	key, err := cs.store.Key()
	if err != nil {
		return owner.ModelStatus{}, err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return owner.ModelStatus{KeySet: key != "", BaseURL: st.BaseURL, Model: st.Model, CodexPath: st.CodexPath, Check: cs.check,
		Gateway: cs.n.modelStatus()}, nil
}

// SetModel changes what req gives. The key is never logged: only that it changed.
func (cs *codexSetup) SetModel(req owner.ModelRequest) (owner.ModelStatus, error) {
	if req.BaseURL != nil || req.Model != nil {
		if _, err := cs.store.Update(func(s *model.Settings) {
			if req.BaseURL != nil {
				s.BaseURL = *req.BaseURL
			}
			if req.Model != nil {
				s.Model = *req.Model
			}
		}); err != nil {
			return owner.ModelStatus{}, invalid(err)
		}
	}
	switch {
	case req.Key != nil && req.RemoveKey:
		return owner.ModelStatus{}, fmt.Errorf("%w: give a key or removeKey, not both", owner.ErrInvalid)
	case req.Key != nil:
		if err := cs.store.SetKey(*req.Key); err != nil {
			return owner.ModelStatus{}, invalid(err)
		}
		cs.n.log.Info("model: a new key was set in the window")
	case req.RemoveKey:
		if err := cs.store.RemoveKey(); err != nil {
			return owner.ModelStatus{}, err
		}
		cs.n.log.Info("model: the key set in the window was removed")
	}
	cs.changed()
	return cs.Model()
}

// changed forgets the last Check and checks Codex again.
func (cs *codexSetup) changed() {
	cs.mu.Lock()
	cs.check = nil
	cs.mu.Unlock()
	cs.n.checkCodex(cs.n.bgCtx)
}

// CheckModel runs the runner's probe: one read-only turn in an empty folder, confined as any.
func (cs *codexSetup) CheckModel(ctx context.Context) owner.ModelCheck {
	res, err := cs.n.probeModel(ctx)
	c := owner.ModelCheck{OK: res.Status == codex.StatusCompleted, At: time.Now().UTC()}
	switch {
	case c.OK:
		c.Answer = codex.ProbeAnswer(res)
	case res.Reason != "":
		c.Error = res.Reason
	case err != nil:
		c.Error = err.Error()
	default:
		c.Error = "the check did not complete"
	}
	cs.mu.Lock()
	cs.check = &c
	cs.mu.Unlock()
	cs.n.log.Info("model check", "ok", c.OK, "error", c.Error)
	return c
}

func invalid(err error) error {
	if errors.Is(err, model.ErrInvalid) {
		return fmt.Errorf("%w: %v", owner.ErrInvalid, err)
	}
	return err
}
