//go:build windows

package app

const browserCommand = "explorer.exe"
