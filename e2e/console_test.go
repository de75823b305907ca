package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
	"github.com/corral-dev/corral/handlers/console"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/handlers/ui"
	"github.com/corral-dev/corral/static"
	"github.com/corral-dev/corral/store"
)

// TestConsoles boots the test guest on the real qemu backend and drives
// both consoles in Chromium through console.mjs: noVNC must show the
// guest's screen (not a blank canvas), xterm.js must round-trip a shell
// command, and a second viewer of the serial console must not disturb the
// first.
func TestConsoles(t *testing.T) {
	node := browser(t)
	for _, f := range []string{"novnc/core/rfb.js", "xterm.mjs", "addon-fit.mjs"} {
		if _, err := os.Stat(filepath.Join("../static/dist", f)); err != nil {
			requireEngine(t, "static/dist has no "+f+" (cd static && npm ci && npm run build)")
		}
	}
	kernel, initrd := qemutest.Guest(t) // skips or fails without qemu or the guest

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	// A short folder: the VMs' unix sockets live in it, and their paths
	// are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "e2e-con")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	qb, err := qemu.New(qemu.Options{Context: "local", Dir: filepath.Join(dir, "vms"), Kernel: kernel, Initrd: initrd, Append: qemutest.Append, Accel: "tcg", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	in, err := qb.Create(ctx, backends.Spec{Name: "console", Type: backends.TypeVM, CPUs: 1, MemoryMiB: 256, DiskMiB: 64, Start: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := qb.Power(sctx, in.Ref, backends.ActionStop); err != nil {
			t.Logf("stop the guest: %v", err)
		}
		if err := qb.Delete(sctx, in.Ref); err != nil {
			t.Logf("delete the guest: %v", err)
		}
	}()
	serialLog, err := qb.SerialLog(in.Ref)
	if err != nil {
		t.Fatal(err)
	}
	qemutest.WaitMarker(t, serialLog, qemutest.Marker, 1, 3*time.Minute)

	// The application's handler, built the way app.New builds it.
	st, err := store.Open(ctx, filepath.Join(dir, "corral.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tm := tasks.New(st, tasks.Options{Logger: log})
	defer tm.Close()
	f := fleet.New(fleet.Options{Logger: log})
	if err := f.Add(qb); err != nil {
		t.Fatal(err)
	}
	f.Refresh(ctx)
	svc := instances.New(f, tm, st, log)
	assets, err := static.New()
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Log(log))
	r.Handle(static.Prefix+"*", assets.Handler())
	ui.Mount(r, ui.Deps{Instances: svc, Fleet: f, Tasks: tm, Assets: assets, Log: log})
	console.Mount(r, console.Deps{Fleet: f, Instances: svc, Assets: assets, Log: log})
	srv := httptest.NewServer(r)
	defer srv.Close()

	out := artifacts(t)
	cmd := exec.CommandContext(ctx, node, "console.mjs", srv.URL, in.Ref.String(), out)
	b, err := cmd.CombinedOutput()
	t.Logf("console.mjs:\n%s", b)
	t.Logf("screenshots in %s", out)
	if err != nil {
		t.Fatalf("console.mjs: %v", err)
	}
}
