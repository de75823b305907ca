package vdi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
)

var deskRef = backends.InstanceRef{Backend: backends.KindSim, Context: "lab", Name: "desk-1"}

// at moves the clock to t0+d and runs one policy pass.
func (e *env) passAt(t *testing.T, svc *vdi.Service, d time.Duration) {
	t.Helper()
	e.clock.Set(t0.Add(d))
	if err := svc.Pass(context.Background()); err != nil {
		t.Fatalf("pass at +%v: %v", d, err)
	}
}

// claimed reports whether alice still holds desk-1.
func (e *env) claimed(t *testing.T, svc *vdi.Service) bool {
	t.Helper()
	_, err := svc.Desktop(context.Background(), alice, "vm/-/desk-1")
	return err == nil
}

func TestReclaimAfterDisconnectGrace(t *testing.T) {
	e := newEnv(t, vdi.Options{Grace: 15 * time.Minute})
	e.pool(t, 1, false)
	if _, err := e.svc.Claim(context.Background(), alice, "rest", "vm/-/desk"); err != nil {
		t.Fatal(err)
	}
	// Never connected through a console (a native client): no disconnect
	// reclaim, however long; the passes renew the claim past its hour.
	e.passAt(t, e.svc, 30*time.Minute)
	e.passAt(t, e.svc, 3*time.Hour)
	if !e.claimed(t, e.svc) {
		t.Fatal("a desktop without a console was reclaimed")
	}
	if d, _ := e.svc.Desktop(context.Background(), alice, "vm/-/desk-1"); d.Expired || d.ReclaimAt != nil {
		t.Fatalf("desktop = %+v: want renewed, no reclaim planned", d)
	}
	// Two consoles; only the last close starts the grace.
	e.clock.Set(t0.Add(3 * time.Hour))
	e.svc.ConsoleOpened(deskRef)
	e.svc.ConsoleOpened(deskRef)
	e.clock.Set(t0.Add(4 * time.Hour))
	e.svc.ConsoleClosed(deskRef)
	e.passAt(t, e.svc, 5*time.Hour)
	if d, _ := e.svc.Desktop(context.Background(), alice, "vm/-/desk-1"); !d.Connected || d.ReclaimAt != nil {
		t.Fatalf("one console still open: %+v", d)
	}
	e.clock.Set(t0.Add(5 * time.Hour))
	e.svc.ConsoleClosed(deskRef) // grace runs from 5h
	d, _ := e.svc.Desktop(context.Background(), alice, "vm/-/desk-1")
	if d.Connected || d.ReclaimAt == nil || !d.ReclaimAt.Equal(t0.Add(5*time.Hour+15*time.Minute)) || d.ReclaimReason != vdi.ReasonDisconnectGrace {
		t.Fatalf("after the last close: %+v", d)
	}
	// A reconnect within the grace cancels it; the next disconnect starts
	// a new one.
	e.passAt(t, e.svc, 5*time.Hour+14*time.Minute)
	e.svc.ConsoleOpened(deskRef)
	e.passAt(t, e.svc, 5*time.Hour+40*time.Minute)
	if !e.claimed(t, e.svc) {
		t.Fatal("reclaimed while a console is open")
	}
	e.svc.ConsoleClosed(deskRef) // new grace from 5h40
	e.passAt(t, e.svc, 5*time.Hour+54*time.Minute)
	if !e.claimed(t, e.svc) {
		t.Fatal("reclaimed before the new grace ended")
	}
	e.passAt(t, e.svc, 5*time.Hour+55*time.Minute)
	if e.claimed(t, e.svc) {
		t.Fatal("not reclaimed after the grace")
	}
	if e.state(t, "desk-1") != backends.StateStopped {
		t.Fatal("a reclaimed persistent member still runs")
	}
	if !hasAudit(e.audit(t), "corral-vdi/broker vdi reclaim (disconnect-grace) vm/-/desk-1 (held by alice@example.com) ok") {
		t.Errorf("audit:\n%s", strings.Join(e.audit(t), "\n"))
	}
}

func TestReclaimAfterMaxSession(t *testing.T) {
	e := newEnv(t, vdi.Options{Grace: 15 * time.Minute, MaxSession: 8 * time.Hour})
	e.pool(t, 1, false)
	if _, err := e.svc.Claim(context.Background(), alice, "rest", "vm/-/desk"); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(t0.Add(time.Hour))
	e.svc.ConsoleOpened(deskRef) // open all along: max duration applies anyway
	d, _ := e.svc.Desktop(context.Background(), alice, "vm/-/desk-1")
	if d.ReclaimAt == nil || !d.ReclaimAt.Equal(t0.Add(8*time.Hour)) || d.ReclaimReason != vdi.ReasonMaxDuration {
		t.Fatalf("desktop = %+v", d)
	}
	e.passAt(t, e.svc, 8*time.Hour-time.Second)
	if !e.claimed(t, e.svc) {
		t.Fatal("reclaimed before the maximum duration")
	}
	e.passAt(t, e.svc, 8*time.Hour)
	if e.claimed(t, e.svc) {
		t.Fatal("not reclaimed at the maximum duration")
	}
	if !hasAudit(e.audit(t), "corral-vdi/broker vdi reclaim (max-duration) vm/-/desk-1 (held by alice@example.com) ok") {
		t.Errorf("audit:\n%s", strings.Join(e.audit(t), "\n"))
	}
}

func TestReclaimFailureRetriesNextPass(t *testing.T) {
	e := newEnv(t, vdi.Options{MaxSession: time.Hour})
	e.pool(t, 1, false)
	if _, err := e.svc.Claim(context.Background(), alice, "rest", "vm/-/desk"); err != nil {
		t.Fatal(err)
	}
	e.fail.Set("power", 0)
	e.passAt(t, e.svc, time.Hour)
	if !e.claimed(t, e.svc) {
		t.Fatal("a failed reclaim ended the claim")
	}
	if !hasAudit(e.audit(t), "corral-vdi/broker vdi reclaim (max-duration) vm/-/desk-1 (held by alice@example.com) error") {
		t.Errorf("audit:\n%s", strings.Join(e.audit(t), "\n"))
	}
	e.fail.Clear("power")
	e.passAt(t, e.svc, time.Hour+30*time.Second)
	if e.claimed(t, e.svc) {
		t.Fatal("the next pass did not retry the reclaim")
	}
}

func TestRestartDoesNotReclaim(t *testing.T) {
	opts := vdi.Options{Grace: 15 * time.Minute}
	e := newEnv(t, opts)
	ctx := context.Background()
	e.pool(t, 2, false)
	if _, err := e.svc.Claim(ctx, alice, "rest", "vm/-/desk"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Claim(ctx, bob, "rest", "vm/-/desk"); err != nil {
		t.Fatal(err)
	}
	bobRef := backends.InstanceRef{Backend: backends.KindSim, Context: "lab", Name: "desk-2"}
	aliceRef := deskRef
	if d, _ := e.svc.Desktop(ctx, alice, "vm/-/desk-1"); d.ID != "vm/-/desk-1" {
		aliceRef, bobRef = bobRef, aliceRef
	}
	// alice is connected when the process stops; bob disconnected at 1h.
	e.clock.Set(t0.Add(30 * time.Minute))
	e.svc.ConsoleOpened(aliceRef)
	e.svc.ConsoleOpened(bobRef)
	e.clock.Set(t0.Add(time.Hour))
	e.svc.ConsoleClosed(bobRef)

	// The process stops at 2h without closing alice's console; a new one
	// starts at 3h.
	e.clock.Set(t0.Add(3 * time.Hour))
	svc := e.restart(opts)
	if err := svc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	e.passAt(t, svc, 3*time.Hour)
	if _, err := svc.Desktop(ctx, alice, aliceDesktop(aliceRef)); err != nil {
		t.Fatal("the restart reclaimed a connected desktop at once")
	}
	// bob's recorded disconnect (1h) is kept: his grace ended long ago.
	if _, err := svc.Desktop(ctx, bob, aliceDesktop(bobRef)); err == nil {
		t.Fatal("bob's desktop, disconnected before the restart, kept past its grace")
	}
	d, _ := svc.Desktop(ctx, alice, aliceDesktop(aliceRef))
	if d.ReclaimAt == nil || !d.ReclaimAt.Equal(t0.Add(3*time.Hour+15*time.Minute)) {
		t.Fatalf("alice's desktop after the restart = %+v; want a full grace from the restart", d)
	}
	e.passAt(t, svc, 3*time.Hour+14*time.Minute)
	if _, err := svc.Desktop(ctx, alice, aliceDesktop(aliceRef)); err != nil {
		t.Fatal("reclaimed before a full grace from the restart")
	}
	e.passAt(t, svc, 3*time.Hour+15*time.Minute)
	if _, err := svc.Desktop(ctx, alice, aliceDesktop(aliceRef)); err == nil {
		t.Fatal("not reclaimed after the grace from the restart")
	}
}

func aliceDesktop(ref backends.InstanceRef) string { return "vm/-/" + ref.Name }
