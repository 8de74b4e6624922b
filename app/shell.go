package app

import (
	"context"
	"fmt"

	"github.com/wailsapp/wails/v2/pkg/runtime"
)

// Shell is the only object bound into the window (window.go.app.Shell): small things the
// web UI cannot do by itself. Services are never bound; the UI reaches them through the
// admin API like a browser does.
type Shell struct {
	ctx func() context.Context // Wails' context, known once the window runs
}

// ChooseFolder opens the system folder picker for a brand's workspace. It returns "" when
// the owner cancels.
func (s *Shell) ChooseFolder() (string, error) {
	ctx := s.ctx()
	if ctx == nil {
		return "", fmt.Errorf("the window is not ready yet")
	}
	dir, err := runtime.OpenDirectoryDialog(ctx, runtime.OpenDialogOptions{
		Title:                "Choose the brand's workspace folder",
		CanCreateDirectories: true,
	})
	if err != nil {
		return "", fmt.Errorf("folder picker: %w", err)
	}
	return dir, nil
}
