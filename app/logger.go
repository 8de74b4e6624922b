package app

import "log/slog"

// wailsLogger sends Wails' log lines to the app's log.
type wailsLogger struct{ log *slog.Logger }

func (l wailsLogger) Print(m string)   { l.log.Info(m, "from", "wails") }
func (l wailsLogger) Trace(m string)   { l.log.Debug(m, "from", "wails") }
func (l wailsLogger) Debug(m string)   { l.log.Debug(m, "from", "wails") }
func (l wailsLogger) Info(m string)    { l.log.Info(m, "from", "wails") }
func (l wailsLogger) Warning(m string) { l.log.Warn(m, "from", "wails") }
func (l wailsLogger) Error(m string)   { l.log.Error(m, "from", "wails") }
func (l wailsLogger) Fatal(m string)   { l.log.Error(m, "from", "wails") }
