//go:build !linux

package fsutil

import "os"

// DataSync makes what was written to f durable (fsync where fdatasync is not at hand).
func DataSync(f *os.File) error { return f.Sync() }
