package vdi_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
)

// TestConsoleAccess: the holder of a claimed desktop may open its
// consoles, nobody else but admins; a member without a claim and an
// instance that is no desktop are refused to everyone but admins.
func TestConsoleAccess(t *testing.T) {
	e := newEnv(t, vdi.Options{})
	e.pool(t, 2, false)
	ctx := context.Background()
	d, err := e.svc.Claim(ctx, alice, "rest", "vm/-/desk")
	if err != nil {
		t.Fatal(err)
	}
	held, _ := backends.ParseRef(d.Ref)
	other := held
	other.Name = map[string]string{"desk-1": "desk-2", "desk-2": "desk-1"}[held.Name]
	gold := backends.InstanceRef{Backend: backends.KindSim, Context: "lab", Name: "gold"}
	for _, tc := range []struct {
		name   string
		who    string
		ref    backends.InstanceRef
		holder bool
		kind   error
	}{
		{"holder", "alice", held, true, nil},
		{"another user", "bob", held, false, backends.ErrForbidden},
		{"admin", "boss", held, false, nil},
		{"holder, unclaimed member", "alice", other, false, backends.ErrForbidden},
		{"holder, not a desktop", "alice", gold, false, backends.ErrForbidden},
		{"admin, not a desktop", "boss", gold, false, nil},
		{"reserved identity", "reconciler", held, false, backends.ErrForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caller := map[string]auth.Identity{"alice": alice, "bob": bob, "boss": boss,
				"reconciler": {Login: vdi.ReconcilerIdentity, Via: auth.ViaTailscale}}[tc.who]
			holder, err := e.svc.ConsoleAccess(ctx, caller, tc.ref)
			if holder != tc.holder || tc.kind == nil && err != nil || tc.kind != nil && !errors.Is(err, tc.kind) {
				t.Fatalf("ConsoleAccess = %v, %v; want %v, %v", holder, err, tc.holder, tc.kind)
			}
		})
	}
}

// rdpServer answers an X.224 Connection Request with the first bytes of
// a TPKT frame, as an RDP server does (enough for backends.ProbeRDP); a
// fake for the connect logic, the real RDP path is tested in
// handlers/console against xrdp.
func rdpServer(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 19)
				if _, err := c.Read(buf); err == nil {
					_, _ = c.Write([]byte{0x03, 0x00, 0x00, 0x13})
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln
}

// TestConnect: the connect answer of a VM desktop on a context whose
// instances offer RDP only: RDP is the target while TCP 3389 answers,
// probed on each request; the reasons name what was skipped; only the
// holder and admins get an answer; a stopped desktop is a 409, a desktop
// without a claim a 404. A claim and a release notify the subscribers.
func TestConnect(t *testing.T) {
	ctx := context.Background()
	srv := rdpServer(t)
	lab := sim.NewRDP(sim.Options{Context: "lab", RDPAddr: srv.Addr().String()})
	if _, err := lab.Create(ctx, backends.Spec{Name: "gold", Type: backends.TypeVM, CPUs: 1, MemoryMiB: 512}); err != nil {
		t.Fatal(err)
	}
	f := fleet.New(fleet.Options{Timeout: time.Minute})
	if err := f.Add(lab); err != nil {
		t.Fatal(err)
	}
	f.Refresh(ctx)
	st := openStore(t)
	tm := tasks.New(st, tasks.Options{})
	t.Cleanup(tm.Close)
	svc := vdi.New(vdi.Options{Fleet: f, Tasks: tm, Store: st})
	changes, stop := svc.Subscribe()
	defer stop()
	if _, err := svc.CreatePool(ctx, admin, vdi.PoolRequest{Name: "desk", Golden: golden, Size: 1}); err != nil {
		t.Fatal(err)
	}
	<-changes // the pool
	if _, err := svc.Connect(ctx, alice, "vm/-/desk-1"); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("connect to an unclaimed desktop: %v, want NotFound", err)
	}
	if _, err := svc.Claim(ctx, alice, "rest", "vm/-/desk"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changes:
	default:
		t.Fatal("a claim did not notify the subscribers")
	}
	c, err := svc.Connect(ctx, alice, "vm/-/desk-1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Target.Protocol != vdi.ProtoRDP || c.Target.URL != "/console/sim/lab/-/desk-1?kind=rdp" || c.Target.Address != srv.Addr().String() || len(c.Fallbacks) != 0 ||
		strings.Join(c.Skipped, "|") != "vnc: the VM has no graphics device|serial: the VM has no serial console" || c.Owner != alice.Login {
		t.Fatalf("connect = %+v", c)
	}
	if _, err := svc.Connect(ctx, bob, "vm/-/desk-1"); !errors.Is(err, backends.ErrForbidden) {
		t.Fatalf("bob's connect to alice's desktop: %v, want Forbidden", err)
	}
	if c2, err := svc.Connect(ctx, boss, "vm/-/desk-1"); err != nil || c2.Target != c.Target {
		t.Fatalf("the admin's connect = %+v, %v", c2, err)
	}
	// RDP stops answering: probed again, it is skipped with the reason,
	// and nothing else is left.
	srv.Close()
	_, err = svc.Connect(ctx, alice, "vm/-/desk-1")
	if !errors.Is(err, backends.ErrConflict) || !strings.Contains(err.Error(), "rdp: TCP 3389 did not answer at "+srv.Addr().String()) {
		t.Fatalf("connect without RDP: %v", err)
	}
	ref := backends.InstanceRef{Backend: backends.KindSim, Context: "lab", Name: "desk-1"}
	if err := lab.Power(ctx, ref, backends.ActionStop); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Connect(ctx, alice, "vm/-/desk-1"); !errors.Is(err, backends.ErrConflict) || !strings.Contains(err.Error(), "start it first") {
		t.Fatalf("connect to a stopped desktop: %v", err)
	}
}

// BenchmarkConnect measures one connect answer of a claimed VM desktop
// whose RDP answers on loopback: the claim read, the member's state, the
// RDP probe and the console list (figures in docs/performance.md).
func BenchmarkConnect(b *testing.B) {
	ctx := context.Background()
	srv := rdpServer(b)
	lab := sim.NewRDP(sim.Options{Context: "lab", RDPAddr: srv.Addr().String()})
	if _, err := lab.Create(ctx, backends.Spec{Name: "gold", Type: backends.TypeVM, CPUs: 1, MemoryMiB: 512}); err != nil {
		b.Fatal(err)
	}
	f := fleet.New(fleet.Options{Timeout: time.Minute})
	if err := f.Add(lab); err != nil {
		b.Fatal(err)
	}
	f.Refresh(ctx)
	st := openStore(b)
	tm := tasks.New(st, tasks.Options{})
	b.Cleanup(tm.Close)
	svc := vdi.New(vdi.Options{Fleet: f, Tasks: tm, Store: st})
	if _, err := svc.CreatePool(ctx, admin, vdi.PoolRequest{Name: "desk", Golden: golden, Size: 1}); err != nil {
		b.Fatal(err)
	}
	if _, err := svc.Claim(ctx, alice, "rest", "vm/-/desk"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if c, err := svc.Connect(ctx, alice, "vm/-/desk-1"); err != nil || c.Target.Protocol != vdi.ProtoRDP {
			b.Fatalf("connect = %+v, %v", c, err)
		}
	}
}
