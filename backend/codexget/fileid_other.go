//go:build !linux

package codexget

import "io/fs"

// idOf: Aether gets Codex for Linux only; elsewhere size and modification time.
func idOf(st fs.FileInfo) fileID { return fileID{size: st.Size(), mtime: st.ModTime()} }
