//go:build !(linux || freebsd || openbsd || netbsd)

package app

import "log/slog"

// newNotifier: only the freedesktop notification service is supported; elsewhere the tray
// or Dock and the Consent page show requests.
func newNotifier(notifyActions, *slog.Logger) notifier { return noNotifier{} }
