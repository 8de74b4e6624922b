package owner

import (
	"sync"
	"testing"
)

// TestRuntime: the counters follow the process, so a soak run sees a leak as growth.
func TestRuntime(t *testing.T) {
	s := New(Config{})
	before := s.Runtime()
	if before.Goroutines < 1 || before.HeapBytes == 0 {
		t.Fatalf("runtime %+v", before)
	}
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { <-release })
	}
	if during := s.Runtime(); during.Goroutines < before.Goroutines+50 {
		t.Errorf("50 goroutines more, but %d → %d", before.Goroutines, during.Goroutines)
	}
	close(release)
	wg.Wait()
}
