package codexsetup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/codexget"
	"github.com/aether/aether/backend/model"
	"github.com/aether/aether/backend/owner"
)

// GetCodex starts the download unless Codex is there; a second press while one runs is
// refused, saying so.
func (s *Setup) GetCodex() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.dl.State {
	case owner.DownloadInstalled:
		return nil
	case owner.DownloadRunning:
		return fmt.Errorf("%w: Codex is being downloaded already (%d of %d MB); wait for it, or cancel it", owner.ErrInvalid, s.dl.Done>>20, s.dl.Total>>20)
	case owner.DownloadUnavailable:
		return fmt.Errorf("%w: %s", owner.ErrInvalid, s.dl.Error)
	}
	s.dl.State, s.dl.Done, s.dl.Error = owner.DownloadRunning, 0, ""
	ctx, cancel := context.WithCancel(s.ctx)
	s.stopDownload = cancel
	s.bg.Add(1)
	go s.download(ctx)
	return nil
}

// CancelCodex stops the download under way: nothing is left of it, and Get Codex can start
// again.
func (s *Setup) CancelCodex() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dl.State != owner.DownloadRunning {
		return fmt.Errorf("%w: no download of Codex is running", owner.ErrInvalid)
	}
	s.canceled = true
	s.stopDownload()
	return nil
}

// download gets Codex, then checks it again so the Status page shows it at once. It stops
// with CancelCodex and Close.
func (s *Setup) download(ctx context.Context) {
	defer s.bg.Done()
	bin, err := s.cfg.Getter.Get(ctx, func(p codexget.Progress) {
		s.mu.Lock()
		s.dl.Done, s.dl.Total = p.Done, p.Total
		s.mu.Unlock()
	})
	s.mu.Lock()
	s.stopDownload()
	canceled := s.canceled
	s.canceled = false
	switch {
	case err != nil && canceled:
		s.dl.State, s.dl.Done, s.dl.Error = owner.DownloadIdle, 0, ""
	case err != nil:
		s.dl.State, s.dl.Error = owner.DownloadFailed, err.Error()
	default:
		s.dl.State, s.dl.Path, s.check = owner.DownloadInstalled, bin, nil
	}
	s.mu.Unlock()
	if err != nil && canceled {
		s.log.Info("Get Codex: canceled by the owner", "package", s.dl.Package)
		return
	}
	if err != nil {
		s.log.Warn("Get Codex failed", "package", s.dl.Package, "err", err)
		return
	}
	s.log.Info("Get Codex: installed", "path", bin)
	s.CheckHealth(s.ctx)
}

func (s *Setup) CodexDownload() owner.CodexDownload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dl
}

// UseCodex names a Codex the owner installed: it must be an executable file.
func (s *Setup) UseCodex(path string) error {
	if path != "" {
		path = filepath.Clean(path)
		st, err := os.Stat(path)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("%w: %s is not an executable file", owner.ErrInvalid, path)
		}
	}
	if _, err := s.cfg.Models.Update(func(st *model.Settings) { st.CodexPath = path }); err != nil {
		return invalid(err)
	}
	s.changed()
	return nil
}

func (s *Setup) Model() (owner.ModelStatus, error) {
	st, keySet, keyFor, err := s.window()
	if err != nil {
		return owner.ModelStatus{}, err
	}
	ms := owner.ModelStatus{KeySet: keySet, KeyFor: keyFor, BaseURL: st.BaseURL, Model: st.Model, CodexPath: st.CodexPath}
	ms.Gateway = s.gateway()
	s.mu.Lock()
	defer s.mu.Unlock()
	ms.Check = s.check
	return ms, nil
}

// SetModel changes what req gives, all or nothing: a refused value changes nothing, and a key
// belongs to the server it is saved with (docs/threats.md M16). The key is never logged: only
// that it changed.
func (s *Setup) SetModel(req owner.ModelRequest) (owner.ModelStatus, error) {
	if err := s.cfg.Models.Change(model.Change{BaseURL: req.BaseURL, Model: req.Model, Key: req.Key, RemoveKey: req.RemoveKey}); err != nil {
		return owner.ModelStatus{}, invalid(err)
	}
	switch {
	case req.Key != nil:
		s.log.Info("model: a new key was set in the window")
	case req.RemoveKey:
		s.log.Info("model: the key set in the window was removed")
	}
	s.changed()
	return s.Model()
}

// changed forgets the last Check and checks Codex again.
func (s *Setup) changed() {
	s.mu.Lock()
	s.check = nil
	s.mu.Unlock()
	s.CheckHealth(s.ctx)
}

// CheckModel runs the runner's probe: one read-only turn in an empty folder, confined as any.
func (s *Setup) CheckModel(ctx context.Context) owner.ModelCheck {
	res, err := s.probe(ctx)
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
	s.mu.Lock()
	s.check = &c
	s.mu.Unlock()
	s.log.Info("model check", "ok", c.OK, "error", c.Error)
	return c
}

func invalid(err error) error {
	if errors.Is(err, model.ErrInvalid) {
		return fmt.Errorf("%w: %v", owner.ErrInvalid, err)
	}
	return err
}
