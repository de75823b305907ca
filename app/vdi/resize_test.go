package vdi_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

var root = auth.Identity{Login: "root@example.com", Via: auth.ViaTailscale, Admin: true}

// members returns the pool's desktops in index order, as registered.
func (e *env) members(t *testing.T) []string {
	t.Helper()
	p, err := e.st.VDIPool(context.Background(), "vm/-/desk")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range p.Members {
		out = append(out, m.Desktop)
	}
	return out
}

// exists reports whether the simulated context has instance name.
func (e *env) exists(t *testing.T, name string) bool {
	t.Helper()
	_, err := e.lab.Get(context.Background(), backends.InstanceRef{Backend: backends.KindSim, Context: "lab", Name: name})
	if err != nil && !errors.Is(err, backends.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// index is the number of desktop vm/-/desk-N.
func index(t *testing.T, desktop string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimPrefix(desktop, "vm/-/desk-"))
	if err != nil {
		t.Fatalf("desktop %q", desktop)
	}
	return n
}

func desks(ns ...int) []string {
	var out []string
	for _, n := range ns {
		out = append(out, "vm/-/desk-"+string(rune('0'+n)))
	}
	return out
}

// TestResizePool: growing clones members numbered on after the highest
// (skipping a name an instance has); shrinking removes unclaimed members,
// highest first, never a claimed one, and is refused with the claimed
// members and the smallest size when too few are unclaimed; every resize
// is audited.
func TestResizePool(t *testing.T) {
	e := newEnv(t, vdi.Options{})
	ctx := context.Background()
	e.pool(t, 2, false)

	r, err := e.svc.ResizePool(ctx, root, "cli", "vm/-/desk", 4)
	if err != nil || !slices.Equal(r.Added, desks(3, 4)) || r.From != 2 || r.To != 4 || r.Task == "" {
		t.Fatalf("grow to 4 = %+v, %v", r, err)
	}
	if got := e.members(t); !slices.Equal(got, desks(1, 2, 3, 4)) || !e.exists(t, "desk-4") {
		t.Fatalf("members after growing: %v", got)
	}
	// A stray instance named desk-5 (not a member): the next member skips it.
	if _, err := e.lab.Create(ctx, backends.Spec{Name: "desk-5", Type: backends.TypeVM, CPUs: 1, MemoryMiB: 64}); err != nil {
		t.Fatal(err)
	}
	if r, err := e.svc.ResizePool(ctx, root, "cli", "vm/-/desk", 5); err != nil || !slices.Equal(r.Added, desks(6)) {
		t.Fatalf("grow past an instance named desk-5 = %+v, %v", r, err)
	}

	// alice and bob hold two members; which ones is the picker's choice.
	var held []string
	for _, who := range []auth.Identity{alice, bob} {
		d, err := e.svc.Claim(ctx, who, "rest", "vm/-/desk")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, d.ID)
	}
	before := e.members(t)
	_, err = e.svc.ResizePool(ctx, root, "cli", "vm/-/desk", 1)
	if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "the smallest size now is 2") ||
		!strings.Contains(err.Error(), held[0]) || !strings.Contains(err.Error(), held[1]) {
		t.Fatalf("shrink below the claimed members: %v, want a refusal naming %v and size 2", err, held)
	}
	if got := e.members(t); !slices.Equal(got, before) {
		t.Fatalf("a refused shrink changed the members: %v", got)
	}

	// Shrink to 2: exactly the claimed members stay.
	r, err = e.svc.ResizePool(ctx, root, "cli", "vm/-/desk", 2)
	if err != nil || len(r.Removed) != 3 {
		t.Fatalf("shrink to 2 = %+v, %v", r, err)
	}
	var free []string
	for _, d := range before {
		if !slices.Contains(held, d) {
			free = append(free, d)
		}
	}
	slices.Reverse(free) // highest number first
	if !slices.Equal(r.Removed, free) {
		t.Fatalf("removed %v, want the unclaimed %v, highest first", r.Removed, free)
	}
	got := e.members(t)
	slices.Sort(held)
	if !slices.Equal(got, held) {
		t.Fatalf("members after shrinking: %v, want the claimed %v", got, held)
	}
	for _, d := range free {
		if e.exists(t, strings.TrimPrefix(d, "vm/-/")) {
			t.Errorf("%s is still an instance after the shrink", d)
		}
	}
	for _, who := range []auth.Identity{alice, bob} {
		ds, err := e.svc.Desktops(ctx, who, false)
		if err != nil || len(ds) != 1 || !slices.Contains(held, ds[0].ID) || !ds[0].Running {
			t.Fatalf("%s's desktops after the shrink: %+v, %v", who.Login, ds, err)
		}
	}
	// The removed members' claims (the shrink's hold) are gone: growing
	// again makes members anyone can claim, numbered after the highest.
	hi := 0
	for _, d := range held {
		hi = max(hi, index(t, d))
	}
	r, err = e.svc.ResizePool(ctx, root, "cli", "vm/-/desk", 3)
	if err != nil || len(r.Added) != 1 || index(t, r.Added[0]) <= hi || !e.exists(t, strings.TrimPrefix(r.Added[0], "vm/-/")) {
		t.Fatalf("grow to 3 = %+v, %v (highest member desk-%d)", r, err, hi)
	}
	if d, err := e.svc.Claim(ctx, boss, "rest", "vm/-/desk"); err != nil || d.ID != r.Added[0] {
		t.Fatalf("claim of the new member: %+v, %v", d, err)
	}

	// Refusals, each audited.
	for _, tc := range []struct {
		name string
		who  auth.Identity
		pool string
		size int
		kind error
		has  string
	}{
		{"not an admin", alice, "vm/-/desk", 4, backends.ErrForbidden, "only admins"},
		{"size 0", root, "vm/-/desk", 0, backends.ErrInvalid, "accepted are 1 to 200"},
		{"too large", root, "vm/-/desk", 201, backends.ErrInvalid, "accepted are 1 to 200"},
		{"no pool", root, "vm/-/nope", 2, backends.ErrNotFound, "does not exist"},
		{"bad id", root, "desk", 2, backends.ErrInvalid, "vm/NAMESPACE/POOL"},
		{"a CT pool", root, "ct/ns/desk", 5, backends.ErrInvalid, "corral vdi ct-pool apply desk -n ns --size 5"},
		{"a CT pool, size 0", root, "ct/ns/desk", 0, backends.ErrInvalid, "size 0: accepted are 1 to 200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.svc.ResizePool(ctx, tc.who, "rest", tc.pool, tc.size); !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.has) {
				t.Fatalf("err = %v, want kind %v with %q", err, tc.kind, tc.has)
			}
		})
	}
	rows := e.audit(t)
	for _, want := range []string{
		"root@example.com vdi pool resize vm/-/desk (size 4) ok",
		"root@example.com vdi pool resize vm/-/desk (size 1) refused",
		"root@example.com vdi pool resize vm/-/desk (size 2) ok",
		"alice@example.com vdi pool resize vm/-/desk (size 4) refused",
	} {
		if !hasAudit(rows, want) {
			t.Errorf("no audit row %q in\n%s", want, strings.Join(rows, "\n"))
		}
	}
	// The same size changes nothing and needs no task.
	if r, err := e.svc.ResizePool(ctx, root, "cli", "vm/-/desk", 3); err != nil || r.Task != "" || len(r.Added)+len(r.Removed) != 0 {
		t.Fatalf("resize to the current size = %+v, %v", r, err)
	}
}

// TestResizePoolCloneFails: a clone that fails ends the growth with an
// error that says the pool keeps what was made, and it does; the
// background variant answers with the task at once.
func TestResizePoolCloneFails(t *testing.T) {
	e := newEnv(t, vdi.Options{})
	ctx := context.Background()
	e.pool(t, 1, false)
	e.fail.Set("clone", 1) // the next clone succeeds, the one after fails
	r, err := e.svc.ResizePool(ctx, root, "cli", "vm/-/desk", 4)
	if !errors.Is(err, backends.ErrFailed) || !strings.Contains(err.Error(), "clone desk-3") ||
		!strings.Contains(err.Error(), "the pool keeps the 1 members made before (it has 2 of 4)") {
		t.Fatalf("grow with a failing clone = %+v, %v", r, err)
	}
	if got := e.members(t); !slices.Equal(got, desks(1, 2)) {
		t.Fatalf("members after the failed growth: %v", got)
	}
	tk, _, err := e.tasks.Get(ctx, r.Task)
	if err != nil || tk.Status != store.TaskError || !strings.Contains(tk.Error, "resize it again") {
		t.Fatalf("the growth's task: %+v, %v", tk, err)
	}
	e.fail.Clear("clone")
	r, started, err := e.svc.StartResizePool(ctx, root, "rest", "vm/-/desk", 3)
	if err != nil || !started || r.Task == "" {
		t.Fatalf("background growth = %+v, %v, %v", r, started, err)
	}
	if tk := e.waitTask(t, r.Task); tk.Status != store.TaskDone {
		t.Fatalf("the background growth's task: %+v", tk)
	}
	if got := e.members(t); !slices.Equal(got, desks(1, 2, 3)) {
		t.Fatalf("members after the background growth: %v", got)
	}
	// A shrink is done before StartResizePool returns.
	if r, started, err := e.svc.StartResizePool(ctx, root, "rest", "vm/-/desk", 1); err != nil || started || !slices.Equal(r.Removed, []string{"vm/-/desk-3", "vm/-/desk-2"}) {
		t.Fatalf("shrink through StartResizePool = %+v, %v, %v", r, started, err)
	}
}
