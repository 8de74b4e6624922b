//go:build darwin

package app

import "log/slog"

// newTray: on macOS the Dock icon reopens the window; Wails v2 and the systray libraries
// both want the main thread's run loop, so there is no status item.
func newTray(trayActions, *slog.Logger) tray { return noTray{} }
