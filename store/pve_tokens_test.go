package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/corral-dev/corral/store"
)

func TestPVETokens(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreatePVEToken(ctx, store.PVEToken{UserID: "alice@pve", TokenID: "ci"}, "s3cret"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreatePVEToken(ctx, store.PVEToken{UserID: "alice@pve", TokenID: "ci"}, "x"); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	if ok, err := s.VerifyPVEToken(ctx, "alice@pve", "ci", "s3cret"); !ok || err != nil {
		t.Fatalf("verify: %v %v", ok, err)
	}
	if ok, _ := s.VerifyPVEToken(ctx, "alice@pve", "ci", "wrong"); ok {
		t.Fatal("a wrong secret verified")
	}
	if id, _ := s.VerifyPVEUserSecret(ctx, "alice@pve", "s3cret"); id != "ci" {
		t.Fatalf("user secret -> %q", id)
	}
	if err := s.DeletePVEToken(ctx, "alice@pve", "ci"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.VerifyPVEToken(ctx, "alice@pve", "ci", "s3cret"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoked token: %v", err)
	}
	if err := s.ReserveVMID(ctx, "sim/lab/-/a", 100); err != nil {
		t.Fatal(err)
	}
	if err := s.ReserveVMID(ctx, "sim/lab/-/b", 100); !errors.Is(err, store.ErrExists) {
		t.Fatalf("taken vmid: %v", err)
	}
	if in, err := s.EnsureInstance(ctx, "sim/lab/-/a"); err != nil || in.VMID != 100 {
		t.Fatalf("EnsureInstance after a reservation: %+v %v", in, err)
	}
}
