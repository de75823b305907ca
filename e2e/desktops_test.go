package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/app"
	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/auth/authtest"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
	"github.com/corral-dev/corral/store"
)

// TestDesktops is issue #6's end-user browser test: the whole server with
// the VDI broker on and OIDC sign-in (two end users and an admin at
// zitadel's provider, started here), a pool of one real QEMU guest cloned
// from a golden test guest, and desktops.mjs in Chromium: alice gets the
// desktop, its console shows in the page, bob cannot open it (403) nor
// get one, alice releases it, bob then gets the same desktop, and the
// admin sees it on the pools page and force-releases it.
func TestDesktops(t *testing.T) {
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		requireEngine(t, "/usr/bin/chromium is missing (apt-get install chromium)")
	}
	if _, err := os.Stat("node_modules/playwright-core"); err != nil {
		requireEngine(t, "e2e/node_modules/playwright-core is missing (cd e2e && npm ci)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		requireEngine(t, "node is not installed")
	}
	for _, f := range []string{"novnc/core/rfb.js", "xterm.mjs", "addon-fit.mjs"} {
		if _, err := os.Stat(filepath.Join("../static/dist", f)); err != nil {
			requireEngine(t, "static/dist has no "+f+" (cd static && npm ci && npm run build)")
		}
	}
	kernel, initrd := qemutest.Guest(t) // skips or fails without qemu or the guest

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	// A short folder: the VMs' unix sockets live in it (108 bytes at most).
	dir, err := os.MkdirTemp("", "e2e-desk")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// The golden VM boots the test guest; its clones keep its kernel.
	gold, err := qemu.New(qemu.Options{Context: "local", Dir: filepath.Join(dir, "vms"), Kernel: kernel, Initrd: initrd, Append: qemutest.Append, Accel: "tcg", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gold.Create(ctx, backends.Spec{Name: "golden", Type: backends.TypeVM, CPUs: 1, MemoryMiB: 256, DiskMiB: 64}); err != nil {
		t.Fatal(err)
	}

	op := authtest.NewProvider(t,
		authtest.User{ID: "1", Email: "alice@example.com", Password: "alice-pw", Name: "Alice", EmailVerified: true},
		authtest.User{ID: "2", Email: "bob@example.com", Password: "bob-pw", Name: "Bob", EmailVerified: true},
		authtest.User{ID: "3", Email: "boss@example.com", Password: "boss-pw", Name: "Boss", EmailVerified: true},
	)
	cfg := app.Config{DataDir: dir, Accel: "tcg", Kubeconfig: filepath.Join(dir, "no-kubeconfig"), Logger: log}
	cfg.Auth = auth.Config{Required: true, Admins: []string{"boss@example.com"},
		OIDC: auth.OIDCConfig{Issuer: op.Issuer, ClientID: op.ClientID, ClientSecret: op.ClientSecret}}
	cfg.VDI = app.VDIConfig{Broker: true, Grace: vdi.DefaultGrace}
	a, err := app.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer func() { // the member may run at the end: stop it
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ref := backends.InstanceRef{Backend: backends.KindQEMU, Context: "local", Name: "desk-1"}
		if b, err := a.Fleet.Backend(ref); err == nil {
			_ = b.Power(sctx, ref, backends.ActionStop)
		}
	}()
	a.Start(ctx)
	a.Fleet.Refresh(ctx)
	pool, err := a.VDI.CreatePool(ctx, tasks.Origin{Actor: "test", Surface: "cli"}, vdi.PoolRequest{Name: "desk", Golden: "qemu/local/-/golden", Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	a.Fleet.Refresh(ctx)
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	op.AllowRedirect(srv.URL + "/login/callback")

	out := artifacts(t)
	start := time.Now()
	cmd := exec.CommandContext(ctx, node, "desktops.mjs", srv.URL, out, pool.Members[0].Desktop, pool.Members[0].Ref, qemutest.Marker)
	b, err := cmd.CombinedOutput()
	t.Logf("desktops.mjs (%s):\n%s", time.Since(start).Round(time.Second), b)
	t.Logf("screenshots in %s", out)
	if err != nil {
		if rows, aerr := a.Store.ListAudit(context.Background(), store.AuditFilter{Limit: 60}); aerr == nil {
			for i := len(rows) - 1; i >= 0; i-- {
				r := rows[i]
				t.Logf("audit %s %s %s %s %s %s: %s", r.At.Format("15:04:05.000"), r.Actor, r.Surface, r.Action, r.Target, r.Outcome, r.Detail)
			}
		}
		t.Fatalf("desktops.mjs: %v", err)
	}

	// The audit log: alice's console connections as the holder, bob's
	// refused console, the claims and releases.
	for _, f := range []struct {
		filter store.AuditFilter
		want   string
	}{
		{store.AuditFilter{Actor: "alice@example.com", Action: "vdi console (vnc)"}, "holder"},
		{store.AuditFilter{Actor: "bob@example.com", Outcome: "refused", Target: pool.Members[0].Ref}, "403"},
		{store.AuditFilter{Actor: "alice@example.com", Action: "vdi release"}, ""},
		{store.AuditFilter{Actor: "bob@example.com", Action: "vdi claim", Outcome: "ok"}, "bob@example.com holds " + pool.Members[0].Desktop},
		{store.AuditFilter{Actor: "boss@example.com", Action: "vdi force-release"}, ""},
	} {
		rows, err := a.Store.ListAudit(ctx, f.filter)
		if err != nil || len(rows) == 0 || !strings.Contains(rows[0].Detail, f.want) {
			t.Errorf("audit %+v: %+v, %v; want a row whose detail holds %q", f.filter, rows, err, f.want)
		}
	}
}
