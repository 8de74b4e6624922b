package limit

import (
	"testing"
	"time"
)

func TestBuckets(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b := NewBuckets(3, 2*time.Second)
	for i := range 3 {
		if ok, _ := b.Take("a", t0); !ok {
			t.Fatalf("token %d of the burst refused", i+1)
		}
	}
	ok, wait := b.Take("a", t0)
	if ok || wait != 2*time.Second {
		t.Fatalf("past the burst: ok %v, wait %v; want a refusal with 2s", ok, wait)
	}
	if w := b.Wait("a", t0.Add(500*time.Millisecond)); w != 1500*time.Millisecond {
		t.Fatalf("Wait %v, want 1.5s", w)
	}
	if ok, _ := b.Take("b", t0); !ok {
		t.Fatal("another key shares the first one's bucket")
	}
	b.Give("a", t0)
	if ok, _ := b.Take("a", t0); !ok {
		t.Fatal("a token given back cannot be taken")
	}
	if ok, _ := b.Take("a", t0.Add(2*time.Second)); !ok {
		t.Fatal("no token after the refill interval")
	}
	b.Prune(t0.Add(time.Minute))
	if len(b.m) != 0 {
		t.Fatalf("%d full buckets kept after Prune", len(b.m))
	}
}

func TestBucketsBounded(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b := NewBuckets(1, time.Hour)
	for i := range maxKeys + 10 {
		b.Take(string(rune(i)), t0)
	}
	if len(b.m) > maxKeys {
		t.Fatalf("%d buckets, over the bound %d", len(b.m), maxKeys)
	}
}

func TestSlots(t *testing.T) {
	s := NewSlots(2)
	if !s.Take("a") || !s.Take("a") || s.Take("a") {
		t.Fatal("want exactly two slots for a")
	}
	if !s.Take("b") {
		t.Fatal("b refused because a holds its slots")
	}
	s.Release("a")
	if !s.Take("a") {
		t.Fatal("a released slot cannot be taken again")
	}
	s.Release("a")
	s.Release("a")
	s.Release("b")
	if len(s.n) != 0 {
		t.Fatalf("slots left held: %v", s.n)
	}
}

func TestRetryAfter(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 90 * time.Second: 90} {
		if got := RetryAfter(d); got != want {
			t.Errorf("RetryAfter(%v) = %d, want %d", d, got, want)
		}
	}
}
