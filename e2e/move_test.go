package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/corral-dev/corral/app"
	"github.com/corral-dev/corral/app/fleet"
)

// TestMovePreview previews a move in the browser (move.mjs): on the demo
// fleet the simulated backends neither hand over nor import disks, so the
// preflight lists refusals and the commit button stays disabled.
func TestMovePreview(t *testing.T) {
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
	if _, err := os.Stat("../static/dist/htmx.min.js"); err != nil {
		requireEngine(t, "static/dist has no htmx (cd static && npm ci && npm run build)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, err := app.New(ctx, app.Config{DataDir: t.TempDir(), Demo: true, DemoSize: 9, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Start(ctx)
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	waitForInventory(t, srv.URL)
	a.Fleet.Refresh(ctx)
	pg, err := a.Fleet.Snapshot().Query(fleet.Query{Context: "sim/lab"})
	if err != nil || len(pg.Instances) == 0 {
		t.Fatalf("no instance in sim/lab: %v", err)
	}
	out := artifacts(t)
	b, err := exec.CommandContext(ctx, node, "move.mjs", srv.URL, "/vm/"+pg.Instances[0].Ref.String(), out).CombinedOutput()
	t.Logf("move.mjs:\n%s", b)
	if err != nil {
		t.Fatalf("move.mjs: %v", err)
	}
}
