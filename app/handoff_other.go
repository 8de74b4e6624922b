//go:build !(linux || freebsd || openbsd || netbsd)

package app

import "log/slog"

// handOff: elsewhere Wails' SingleInstanceLock hands a second launch over by itself.
func handOff([]string, *slog.Logger) bool { return false }
