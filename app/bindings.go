//go:build !bindings

package app

// generatingBindings is true only in the binary `wails build` runs to generate bindings.
const generatingBindings = false
