package fanout

import "testing"

// A subscriber a buffer behind loses what does not fit, the others get it; an ended
// subscription's channel is closed once and gets nothing more.
func TestHub(t *testing.T) {
	h := New[int](1)
	slow, endSlow := h.Subscribe()
	fast, endFast := h.Subscribe()
	if d := h.Publish(1); d != 0 {
		t.Fatalf("dropped %d with room for everyone", d)
	}
	if got := <-fast; got != 1 {
		t.Fatalf("fast got %d", got)
	}
	if d := h.Publish(2); d != 1 {
		t.Fatalf("dropped %d, want the slow subscriber's", d)
	}
	if got := <-slow; got != 1 {
		t.Fatalf("slow got %d, want the first event", got)
	}
	endSlow()
	endSlow()
	if _, ok := <-slow; ok {
		t.Fatal("an ended subscription's channel is open")
	}
	if d := h.Publish(3); d != 1 { // fast still holds 2
		t.Fatalf("dropped %d", d)
	}
	endFast()
}
