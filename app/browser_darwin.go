//go:build darwin

package app

const browserCommand = "open"
