//go:build bindings

package app

const generatingBindings = true
