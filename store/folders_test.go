package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/corral-dev/corral/store"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestFolderCreateMakesParents(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	if err := s.CreateFolder(ctx, "prod/web/front"); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Folders(ctx)
	if want := []string{"prod", "prod/web", "prod/web/front"}; !slices.Equal(got, want) {
		t.Fatalf("folders = %v, want %v", got, want)
	}
	if err := s.CreateFolder(ctx, "prod/web"); !errors.Is(err, store.ErrExists) {
		t.Fatalf("creating an existing folder: %v, want ErrExists", err)
	}
	if err := s.CreateFolder(ctx, "1/2/3/4/5/6/7/8"); err != nil {
		t.Fatalf("depth 8: %v", err)
	}
	if err := s.CreateFolder(ctx, "1/2/3/4/5/6/7/8/9"); !errors.Is(err, store.ErrFolderDepth) {
		t.Fatalf("depth 9: %v, want ErrFolderDepth", err)
	}
}

func TestFolderOneFolderPerInstance(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	for _, p := range []string{"a", "b"} {
		if err := s.CreateFolder(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	const ref = "sim/lab/-/web"
	if err := s.SetFolderMember(ctx, "a", ref); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFolderMember(ctx, "b", ref); err != nil { // a drag from a to b
		t.Fatal(err)
	}
	ms, _ := s.FolderMembers(ctx)
	if len(ms) != 1 || ms[0] != (store.FolderMember{Ref: ref, Path: "b"}) {
		t.Fatalf("members = %+v, want only %s in b", ms, ref)
	}
	if p, err := s.FolderOf(ctx, ref); err != nil || p != "b" {
		t.Fatalf("FolderOf = %q, %v; want b", p, err)
	}
	if _, err := s.FolderOf(ctx, "sim/lab/-/other"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FolderOf an instance in no folder: %v, want ErrNotFound", err)
	}
	if err := s.SetFolderMember(ctx, "nope", ref); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("member of a missing folder: %v, want ErrNotFound", err)
	}
	if err := s.RemoveFolderMember(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveFolderMember(ctx, ref); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second remove: %v, want ErrNotFound", err)
	}
}

func TestFolderMove(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	for _, p := range []string{"prod/web/front", "prod/db", "prod_x", "staging"} {
		if err := s.CreateFolder(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetFolderMember(ctx, "prod/web/front", "sim/lab/-/a"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFolderMember(ctx, "prod_x", "sim/lab/-/x"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, from, to string
		want           error
	}{
		{"onto itself", "prod", "prod", store.ErrFolderCycle},
		{"under itself", "prod", "prod/web/prod", store.ErrFolderCycle},
		{"onto an existing folder", "prod/db", "staging", store.ErrExists},
		{"missing source", "nope", "other", store.ErrNotFound},
		{"too deep", "prod", "1/2/3/4/5/6/7", store.ErrFolderDepth}, // prod/web/front lands at depth 9
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.MoveFolder(ctx, tc.from, tc.to); !errors.Is(err, tc.want) {
				t.Fatalf("MoveFolder(%s, %s) = %v, want %v", tc.from, tc.to, err, tc.want)
			}
		})
	}
	if err := s.MoveFolder(ctx, "prod", "archive/prod-2025"); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Folders(ctx)
	want := []string{"archive", "archive/prod-2025", "archive/prod-2025/db", "archive/prod-2025/web", "archive/prod-2025/web/front", "prod_x", "staging"}
	if !slices.Equal(got, want) {
		t.Fatalf("after move: %v, want %v", got, want)
	}
	ms, _ := s.FolderMembers(ctx)
	if len(ms) != 2 || ms[0] != (store.FolderMember{Ref: "sim/lab/-/a", Path: "archive/prod-2025/web/front"}) || ms[1].Path != "prod_x" {
		t.Fatalf("members after move = %+v: the member did not follow its folder, or prod_x (a LIKE wildcard) moved too", ms)
	}
}

func TestFolderDeleteUnfoldersMembers(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	for _, p := range []string{"prod/web", "prod-old"} {
		if err := s.CreateFolder(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.SetFolderMember(ctx, "prod", "sim/lab/-/a")
	_ = s.SetFolderMember(ctx, "prod/web", "sim/lab/-/b")
	_ = s.SetFolderMember(ctx, "prod-old", "sim/lab/-/c")
	under, err := s.FolderMembersUnder(ctx, "prod")
	if err != nil || len(under) != 2 {
		t.Fatalf("members under prod = %+v %v, want a and b", under, err)
	}
	n, err := s.DeleteFolder(ctx, "prod")
	if err != nil || n != 2 {
		t.Fatalf("DeleteFolder = %d %v, want 2 unfoldered", n, err)
	}
	got, _ := s.Folders(ctx)
	if !slices.Equal(got, []string{"prod-old"}) {
		t.Fatalf("folders after delete = %v", got)
	}
	ms, _ := s.FolderMembers(ctx)
	if len(ms) != 1 || ms[0].Ref != "sim/lab/-/c" {
		t.Fatalf("members after delete = %+v, want only c", ms)
	}
	if _, err := s.DeleteFolder(ctx, "prod"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if _, err := s.FolderMembersUnder(ctx, "prod"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("members under a deleted folder: %v", err)
	}
}

// A deleted instance leaves its folder with its registry entry.
func TestDeleteInstanceLeavesFolder(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	const ref = "sim/lab/-/web"
	if err := s.CreateFolder(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsureInstance(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFolderMember(ctx, "team", ref); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteInstance(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if p, err := s.FolderOf(ctx, ref); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after DeleteInstance the ref is still in folder %q (%v)", p, err)
	}
}
