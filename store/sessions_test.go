package store

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"
)

var (
	_ scs.CtxStore         = (*Sessions)(nil)
	_ scs.IterableCtxStore = (*Sessions)(nil)
	_ scs.IterableStore    = (*Sessions)(nil)
)

func TestSessions(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"), Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ss := s.Sessions()

	if _, found, err := ss.FindCtx(ctx, "nope"); found || err != nil {
		t.Fatalf("Find of a missing token = found %v, err %v; want not found, no error", found, err)
	}
	if err := ss.CommitCtx(ctx, "a", []byte("one"), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := ss.CommitCtx(ctx, "a", []byte("two"), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if b, found, err := ss.FindCtx(ctx, "a"); err != nil || !found || !bytes.Equal(b, []byte("two")) {
		t.Fatalf("Find after a second commit = %q, %v, %v; want the new data", b, found, err)
	}
	if err := ss.CommitCtx(ctx, "old", []byte("x"), now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := ss.FindCtx(ctx, "old"); found {
		t.Fatal("an expired session was found")
	}
	all, err := ss.AllCtx(ctx)
	if err != nil || len(all) != 1 || string(all["a"]) != "two" {
		t.Fatalf("All = %v, %v; want only the live session", all, err)
	}
	if n, err := ss.DeleteExpired(ctx); err != nil || n != 1 {
		t.Fatalf("DeleteExpired = %d, %v; want 1", n, err)
	}
	if err := ss.DeleteCtx(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := ss.DeleteCtx(ctx, "a"); err != nil {
		t.Fatalf("deleting a missing token: %v, want nil", err)
	}
	if _, found, _ := ss.FindCtx(ctx, "a"); found {
		t.Fatal("a deleted session was found")
	}
}

// TestSessionsWithSCS runs a session through scs itself: put, commit,
// load by the token, renew (the old token stops working), destroy.
func TestSessionsWithSCS(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "c.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := scs.New()
	m.Store = s.Sessions()
	m.HashTokenInStore = true
	c, _ := m.Load(ctx, "")
	m.Put(c, "login", "alice@example.com")
	tok, _, err := m.Commit(c)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := m.Load(ctx, tok)
	if err != nil || m.GetString(c2, "login") != "alice@example.com" {
		t.Fatalf("loaded session login = %q, %v", m.GetString(c2, "login"), err)
	}
	if err := m.RenewToken(c2); err != nil {
		t.Fatal(err)
	}
	tok2, _, err := m.Commit(c2)
	if err != nil || tok2 == tok {
		t.Fatalf("renewed token %q (was %q), %v", tok2, tok, err)
	}
	if c3, _ := m.Load(ctx, tok); m.GetString(c3, "login") != "" {
		t.Fatal("the token before renewal still loads the session")
	}
	c4, _ := m.Load(ctx, tok2)
	if err := m.Destroy(c4); err != nil {
		t.Fatal(err)
	}
	if c5, _ := m.Load(ctx, tok2); m.GetString(c5, "login") != "" {
		t.Fatal("a destroyed session still loads")
	}
}
