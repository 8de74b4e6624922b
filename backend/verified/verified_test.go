package verified

import (
	"fmt"
	"testing"
	"time"
)

func TestCache(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c := New[string](3)
	c.Put("tok-a", "alice", t0.Add(time.Minute))
	if v, ok := c.Get("tok-a", t0.Add(time.Minute)); !ok || v != "alice" {
		t.Fatalf("at its last moment: %q %v", v, ok)
	}
	if _, ok := c.Get("tok-a", t0.Add(time.Minute+time.Nanosecond)); ok {
		t.Fatal("returned past its time")
	}
	if _, ok := c.Get("tok-a", t0); ok {
		t.Fatal("an expired entry is dropped, not kept for an earlier clock")
	}
	if _, ok := c.Get("tok-b", t0); ok {
		t.Fatal("a token never stored was found")
	}
	// One byte apart is another token.
	c.Put("tok-c", "carol", t0.Add(time.Hour))
	if _, ok := c.Get("tok-C", t0); ok {
		t.Fatal("a different token matched")
	}
	// Bounded: the fourth token evicts one of the first three.
	for i := range 4 {
		c.Put(fmt.Sprint("t", i), "x", t0.Add(time.Hour))
	}
	if n := len(c.m); n != 3 {
		t.Fatalf("holds %d tokens, at most 3", n)
	}
}
