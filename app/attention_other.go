//go:build !linux

package app

import (
	"context"

	"github.com/wailsapp/wails/v2/pkg/runtime"
)

// requestAttention shows the window; only the GTK build can do so without taking the focus.
func requestAttention(ctx context.Context, _ string) { runtime.WindowShow(ctx) }
