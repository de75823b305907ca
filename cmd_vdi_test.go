package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
)

// TestVDICommands drives `corral vdi` against the local QEMU context of
// the database the commands use: a golden VM made beside it, a pool of
// two clones, an assignment that starts a member, an unassign that stops
// it, and the pool's delete.
func TestVDICommands(t *testing.T) {
	qemutest.Tools(t)
	dir := t.TempDir()
	t.Setenv("CORRAL_DATA", dir)
	t.Setenv("CORRAL_KUBECONFIG", filepath.Join(dir, "no-kubeconfig"))
	t.Setenv("CORRAL_ACCEL", "tcg")
	ctx := context.Background()
	b, err := qemu.New(qemu.Options{Dir: filepath.Join(dir, "vms"), Accel: "tcg", ShutdownTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, backends.Spec{Name: "gold", Type: backends.TypeVM, CPUs: 1, MemoryMiB: 64, DiskMiB: 16}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []string{"desk-1", "desk-2", "desk-3"} {
			_ = b.Power(context.Background(), backends.InstanceRef{Backend: backends.KindQEMU, Context: "local", Name: n}, backends.ActionStop)
		}
	})
	corral := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(ctx, args, &out); err != nil {
			t.Fatalf("corral %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	for _, want := range []struct {
		args []string
		has  []string
	}{
		{[]string{"vdi", "pool", "create", "desk", "--from", "qemu/local/-/gold", "--size", "2"}, []string{"pool vm/-/desk created: 2 members", "vm/-/desk-1", "vm/-/desk-2"}},
		{[]string{"vdi", "pool", "list"}, []string{"vm/-/desk  (persistent, 2 members, from qemu/local/-/gold)", "free"}},
		{[]string{"vdi", "assign", "desk", "alice@example.com"}, []string{"→ alice@example.com"}},
		{[]string{"vdi", "pool", "list"}, []string{"alice@example.com", "running"}},
	} {
		out := corral(want.args...)
		for _, h := range want.has {
			if !strings.Contains(out, h) {
				t.Fatalf("corral %s:\n%s\nlacks %q", strings.Join(want.args, " "), out, h)
			}
		}
	}
	list := corral("vdi", "pool", "list")
	member := "desk-1"
	if !strings.Contains(list, "vm/-/desk-1                  alice") {
		member = "desk-2"
	}
	// connect: the member runs without a guest that serves RDP, so VNC
	// is the target, serial the fallback, and RDP skipped with a reason.
	con := corral("vdi", "connect", member, "--url", "http://corral.test")
	for _, h := range []string{"desktop vm/-/" + member + " (held by alice@example.com)", "connect: VNC: http://corral.test/console/qemu/local/-/" + member + "?kind=vnc",
		"fallback: serial: http://corral.test/console/qemu/local/-/" + member + "?kind=serial", "skipped: rdp: "} {
		if !strings.Contains(con, h) {
			t.Fatalf("corral vdi connect:\n%s\nlacks %q", con, h)
		}
	}
	corral("vdi", "connect", member, "--user", "alice@example.com")
	if err := run(ctx, []string{"vdi", "connect", member, "--user", "bob@example.com"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "not yours") {
		t.Fatalf("connect as bob, who does not hold %s: %v", member, err)
	}
	// --open with --url: the browser ($BROWSER, a script that records
	// its argument) on the target's console page.
	opened := filepath.Join(dir, "opened")
	browser := filepath.Join(dir, "browser")
	if err := os.WriteFile(browser, []byte("#!/bin/sh\necho \"$1\" > "+opened+".tmp && mv "+opened+".tmp "+opened+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BROWSER", browser)
	if out := corral("vdi", "connect", member, "--url", "http://corral.test", "--open"); !strings.Contains(out, "opened: "+browser) {
		t.Fatalf("connect --open:\n%s", out)
	}
	want := "http://corral.test/console/qemu/local/-/" + member + "?kind=vnc"
	for i := 0; ; i++ {
		b, err := os.ReadFile(opened)
		if err == nil {
			if got := strings.TrimSpace(string(b)); got != want {
				t.Fatalf("the browser opened %q, want %q", got, want)
			}
			break
		}
		if i == 500 {
			t.Fatal("connect --open started no browser")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Without --url the VNC target has no native client here: an error
	// that says to give --url.
	if err := run(ctx, []string{"vdi", "connect", member, "--open"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "give --url") {
		t.Fatalf("connect --open without --url: %v", err)
	}

	// Live resize: one more real clone, then down to the claimed member.
	if out := corral("vdi", "pool", "resize", "desk", "--size", "3"); !strings.Contains(out, "added vm/-/desk-3") || !strings.Contains(out, "pool vm/-/desk: 3 members (was 2)") {
		t.Fatalf("pool resize to 3:\n%s", out)
	}
	if out := corral("vdi", "pool", "resize", "desk", "--size", "1"); !strings.Contains(out, "removed vm/-/desk-3") || !strings.Contains(out, "pool vm/-/desk: 1 members (was 3)") {
		t.Fatalf("pool resize to 1:\n%s", out)
	}
	if out := corral("vdi", "pool", "list"); !strings.Contains(out, "vm/-/"+member+" ") || !strings.Contains(out, "alice@example.com") || !strings.Contains(out, "1 members") {
		t.Fatalf("after resizing to 1 the claimed member must stay:\n%s", out)
	}
	if err := run(ctx, []string{"vdi", "pool", "resize", "ct/ns/desk", "--size", "3"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "corral vdi ct-pool apply desk -n ns --size 3") {
		t.Fatalf("resize of a CT pool: %v", err)
	}
	corral("vdi", "unassign", member)
	if out := corral("vdi", "pool", "list"); strings.Contains(out, "alice") || strings.Contains(out, "running") {
		t.Fatalf("after unassign:\n%s", out)
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"vdi", "assign", "desk", "corral-vdi/reconciler"}, &out); err == nil {
		t.Fatal("assigned a desktop to the reserved identity")
	}
	corral("vdi", "pool", "delete", "desk")
	if out := corral("vdi", "pool", "list"); out != "" {
		t.Fatalf("pools after delete:\n%s", out)
	}
	list2, err := b.List(ctx)
	if err != nil || len(list2) != 1 {
		t.Fatalf("instances after the pool's delete: %+v, %v", list2, err)
	}
}
