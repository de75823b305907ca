// Package e2e drives the whole server in a real browser: the dashboard
// test builds the application in-process in demo mode and runs
// dashboard.mjs (playwright-core, /usr/bin/chromium) against it.
package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/app"
)

// requireEngine skips the test when an engine is missing, or fails it
// when CORRAL_REQUIRE_ENGINES=1 (CI, where .ci/run installs them).
func requireEngine(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CORRAL_REQUIRE_ENGINES") == "1" {
		t.Fatalf("engine: %s (CORRAL_REQUIRE_ENGINES=1)", why)
	}
	t.Skipf("engine: %s", why)
}

// browser checks what a browser test needs (Chromium, playwright-core,
// node, the built front-end assets) and returns node's path.
func browser(t *testing.T) string {
	t.Helper()
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
	return node
}

// artifacts returns the folder for screenshots: under
// $CORRAL_TEST_ARTIFACTS when set, else in the test's temporary folder.
func artifacts(t *testing.T) string {
	dir := os.Getenv("CORRAL_TEST_ARTIFACTS")
	if dir == "" {
		return filepath.Join(t.TempDir(), "artifacts")
	}
	dir = filepath.Join(dir, "e2e", t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDashboard(t *testing.T) { runDemoScript(t, "dashboard.mjs") }

// runDemoScript runs a playwright script against the whole server built
// in-process in demo mode (simulated contexts and libvirt's test driver).
func runDemoScript(t *testing.T, script string) {
	node := browser(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	a, err := app.New(ctx, app.Config{DataDir: t.TempDir(), Demo: true, DemoSize: 90, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Start(ctx)
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	waitForInventory(t, srv.URL)

	out := artifacts(t)
	cmd := exec.CommandContext(ctx, node, script, srv.URL, out)
	b, err := cmd.CombinedOutput()
	t.Logf("%s:\n%s", script, b)
	t.Logf("screenshots in %s", out)
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
}

// waitForInventory waits until the first refresh has put rows in the
// table.
func waitForInventory(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get(base + "/")
		if err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK && strings.Contains(string(body), `data-testid="instance-row"`) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the inventory stayed empty for 30 s")
}
