// Package codexsetup is the Status page's Codex: whether it is found, signed in and confined
// (its health, checked now and then), Get Codex (backend/codexget), the model settings the
// owner types in the window (backend/model) and their Check. It is owner.CodexSetup, and it
// tells the runner which Codex and which model to use at every check and turn.
package codexsetup

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/codexget"
	"github.com/aether/aether/backend/model"
	"github.com/aether/aether/backend/modelgw"
	"github.com/aether/aether/backend/owner"
)

// Config is where the settings and the Codex got live, and the runner they are for.
type Config struct {
	// Runner runs Codex for the node; New points its Find and Upstream at the settings.
	Runner *codex.Runner
	Models *model.Store     // model.json and model.key in the data dir
	Getter *codexget.Getter // gets the pinned Codex into <data dir>/codex-bin
	// ProbeDir keeps the state of Check's probe turn (<data dir>/codex, as every turn's).
	ProbeDir string
	Logger   *slog.Logger
}

// Setup is the node's owner.CodexSetup. It is safe for concurrent use.
type Setup struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context // ends with Close: a download stops with the node
	cancel context.CancelFunc
	bg     sync.WaitGroup

	mu           sync.Mutex
	dl           owner.CodexDownload
	stopDownload context.CancelFunc // the download under way's
	canceled     bool               // the owner canceled it
	check        *owner.ModelCheck  // the last Check, forgotten when a setting changes
	health       codex.Health       // the last health check

	models *modelgw.Gateway // set by StartModels
}

// New reads what is there already (a Codex got before) and points the runner at it.
func New(cfg Config) *Setup {
	s := &Setup{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	cfg.Runner.Find, cfg.Runner.Upstream = s.find, s.upstream
	s.dl = owner.CodexDownload{Version: codexget.Version, State: owner.DownloadIdle}
	p, err := codexget.ForThisMachine()
	switch {
	case err != nil:
		s.dl.State, s.dl.Error = owner.DownloadUnavailable, err.Error()
	default:
		s.dl.Package, s.dl.Total = p.Package(), p.Size
		switch bin, err := cfg.Getter.Binary(); {
		case err != nil: // swapped since it was unpacked (X11): Get Codex puts the pinned one back
			s.dl.State, s.dl.Error = owner.DownloadFailed, err.Error()
			s.log.Error("Get Codex: " + err.Error())
		case bin != "":
			s.dl.State, s.dl.Path, s.dl.Done = owner.DownloadInstalled, bin, p.Size
		}
	}
	return s
}

// Close stops a download under way and waits for it.
func (s *Setup) Close() {
	s.cancel()
	s.bg.Wait()
	if s.models != nil {
		s.models.Close()
	}
}

// Getter is what Get Codex downloads with (tests pin a package of their own on it).
func (s *Setup) Getter() *codexget.Getter { return s.cfg.Getter }

// find is the runner's codex when no --codex or AETHER_CODEX names one: the Codex the owner
// named in the window (trusted as it is, docs/codex-get.md), else the one Aether got if it is
// still the one it unpacked (X11), else "" (codex on PATH).
func (s *Setup) find() (string, error) {
	if st, err := s.cfg.Models.Settings(); err == nil && st.CodexPath != "" {
		return st.CodexPath, nil
	}
	return s.cfg.Getter.Binary()
}

// window is the model settings, whether a key is saved for their server, and else the server
// one is saved for ("" = none); never the key, which the model gateway alone reads
// (docs/model-gateway.md).
func (s *Setup) window() (st model.Settings, keySet bool, keyFor string, err error) {
	if st, err = s.cfg.Models.Settings(); err != nil {
		return st, false, "", err
	}
	server, err := s.cfg.Models.KeyServer()
	if err != nil || server == "" {
		return st, false, "", err
	}
	if server == st.Server() {
		return st, true, "", nil
	}
	return st, false, server, nil
}

// upstream is the runner's model as the window set it.
func (s *Setup) upstream() (codex.Upstream, error) {
	st, keySet, _, err := s.window()
	if err != nil {
		return codex.Upstream{}, err
	}
	up := codex.Upstream{Model: st.Model, KeySet: keySet}
	if st.BaseURL != "" {
		up.Host = model.Host(st.BaseURL)
	}
	return up, nil
}

// CheckHealth reads Codex's health (found, version, signed in, confined) for the Status page,
// and logs what changed.
func (s *Setup) CheckHealth(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	h := s.cfg.Runner.Check(cctx)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.health
	if h == old {
		return
	}
	// Logged before Health shows it: whoever reads a problem can find it in the log.
	s.log.Info("codex", "found", h.Found, "path", h.Path, "version", h.Version, "versionOk", h.VersionOK, "signedIn", h.LoggedIn,
		"credential", h.Credential.Summary, "problem", h.Error)
	if h.Confinement != old.Confinement {
		if h.Confinement.Available {
			s.log.Info(h.Confinement.Text())
		} else {
			s.log.Error(h.Confinement.Text() + "; no turn runs until it is fixed")
		}
	}
	s.health = h
}

// Health is the last CheckHealth as the owner's service shows it (owner.Node).
func (s *Setup) Health() (owner.CodexStatus, owner.Confinement) {
	s.mu.Lock()
	h := s.health
	s.mu.Unlock()
	c := owner.CodexStatus{Found: h.Found, Path: h.Path, Version: h.Version, VersionOK: h.VersionOK, LoggedIn: h.LoggedIn || h.APIKey, Error: h.Error,
		Pinned: codexget.Version, PinNote: pinNote(h.Version, h.VersionOK)}
	c.Credential.Kind, c.Credential.Summary, c.Credential.Problem = h.Credential.Kind, h.Credential.Summary, h.Credential.Problem
	return c, owner.Confinement{Available: h.Confinement.Available, Mechanism: h.Confinement.Mechanism, Text: h.Confinement.Text()}
}

// pinNote says when the codex in use (an owner's own, codexPath) is a supported release other
// than the pinned one, and what may differ from what Aether was tested with.
func pinNote(version string, supported bool) string {
	pin := codexget.Version
	switch {
	case !supported || version == "" || version == pin:
		return ""
	case codex.NewerThan(version, pin):
		return fmt.Sprintf("Codex %s is newer than %s, the release this Aether pins and was tested with. Turns run, "+
			"but a newer Codex may change its events, its options and what it reads by itself, which the confinement "+
			"tests have not seen. To run %s, empty the codex path and use Get Codex.", version, pin, pin)
	default:
		return fmt.Sprintf("Codex %s is older than %s, the release this Aether pins and was tested with. Turns run "+
			"(%s or newer is supported), without the fixes and tool changes of the releases since. To run %s, empty the codex path and use Get Codex.",
			version, pin, codex.MinVersion, pin)
	}
}
