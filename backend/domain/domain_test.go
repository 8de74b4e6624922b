package domain

import "testing"

func TestAgentKey(t *testing.T) {
	a := Agent{Issuer: "https://a.example|x", Subject: "y"}
	b := Agent{Issuer: "https://a.example", Subject: "x|y"}
	if a.Key() == b.Key() {
		t.Fatalf("distinct agents share key %q", a.Key())
	}
	if got, want := (Agent{Issuer: "https://a.example", Subject: "alice"}).Key(), "17:https://a.example|alice"; got != want {
		t.Fatalf("Key() = %q, want %q", got, want)
	}
}
