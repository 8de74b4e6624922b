package store

import (
	"context"
	"testing"
)

func TestMeta(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	if _, ok, err := db.GetMeta(ctx, "k"); ok || err != nil {
		t.Fatalf("unset key: ok=%v err=%v", ok, err)
	}
	for _, v := range []string{"one", "two"} {
		if err := db.SetMeta(ctx, "k", v); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	db2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if v, ok, err := db2.GetMeta(ctx, "k"); v != "two" || !ok || err != nil {
		t.Fatalf("after reopen: %q %v %v", v, ok, err)
	}
}
