package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-dev/corral/store"
)

func TestVDIPoolsAndClaims(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	p := store.VDIPool{ID: "vm/-/desk", Kind: "vm", Namespace: "-", Name: "desk", Golden: "qemu/local/-/gold"}
	if err := s.CreateVDIPool(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateVDIPool(ctx, p); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	for i, n := range []string{"desk-2", "desk-1"} {
		if err := s.AddVDIMember(ctx, store.VDIMember{Desktop: "vm/-/" + n, Pool: p.ID, Index: 2 - i, Ref: "qemu/local/-/" + n}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddVDIMember(ctx, store.VDIMember{Desktop: "vm/-/other", Pool: p.ID, Index: 3, Ref: "qemu/local/-/desk-1"}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("a second member on one instance: %v, want ErrExists", err)
	}
	got, err := s.VDIPool(ctx, p.ID)
	if err != nil || len(got.Members) != 2 || got.Members[0].Desktop != "vm/-/desk-1" {
		t.Fatalf("pool = %+v, %v; want members in index order", got, err)
	}
	if m, err := s.VDIMemberByRef(ctx, "qemu/local/-/desk-2"); err != nil || m.Desktop != "vm/-/desk-2" {
		t.Fatalf("member by ref = %+v, %v", m, err)
	}
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	c, err := s.AcquireVDIClaim(ctx, store.VDIClaim{Desktop: "vm/-/desk-1", Pool: p.ID, Holder: "alice", Session: "s1",
		Acquired: now, Renewed: now, Expires: now.Add(time.Hour)}, now)
	if err != nil || c.Version != 1 || !c.Expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("acquire = %+v, %v", c, err)
	}
	if _, err := s.AcquireVDIClaim(ctx, store.VDIClaim{Desktop: "vm/-/desk-1", Pool: p.ID, Holder: "bob", Session: "s2",
		Acquired: now, Renewed: now, Expires: now.Add(time.Hour)}, now.Add(59*time.Minute)); !errors.Is(err, store.ErrExists) {
		t.Fatalf("acquire of a held desktop: %v, want ErrExists", err)
	}
	if err := s.DeleteVDIClaim(ctx, "vm/-/desk-1", 7); !errors.Is(err, store.ErrChanged) {
		t.Fatalf("delete at a wrong version: %v, want ErrChanged", err)
	}
	// The pool's delete takes its members' rows with it.
	if err := s.DeleteVDIPool(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.VDIMemberByRef(ctx, "qemu/local/-/desk-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("member after the pool's delete: %v", err)
	}
	if err := s.DeleteVDIPool(ctx, p.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}
