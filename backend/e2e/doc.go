// Package e2e runs the whole node — gateway, admin UI, node API, SQLite,
// the fake (or real) Codex — on loopback and drives it the way personal
// agents and the owner do. It holds tests only.
package e2e
