//go:build !darwin && !windows

package app

const browserCommand = "xdg-open"
