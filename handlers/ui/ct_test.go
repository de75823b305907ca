package ui_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/handlers/ui"
	"github.com/corral-dev/corral/static"
	"github.com/corral-dev/corral/store"
)

// ctBackend is one CT for the page's logic only: stop removes its pod,
// start makes it again, and it offers its shell while it runs. The
// KubeVirt backend's CTs are tested against a real API server in
// backends/kubevirt and through the whole server in e2e.
type ctBackend struct {
	mu    sync.Mutex
	state backends.State
}

var (
	ctRef = backends.InstanceRef{Backend: backends.KindKubeVirt, Context: "k", Namespace: "ns", Name: "box"}
	// vmRef is a running VM whose console the backend refuses.
	vmRef = backends.InstanceRef{Backend: backends.KindKubeVirt, Context: "k", Namespace: "ns", Name: "vm"}
)

func vmInst() backends.Instance {
	return backends.Instance{Ref: vmRef, Type: backends.TypeVM, State: backends.StateRunning, CPUs: 1, MemoryMiB: 512}
}

func (b *ctBackend) Kind() backends.Kind { return backends.KindKubeVirt }
func (b *ctBackend) Context() string     { return "k" }
func (b *ctBackend) inst() backends.Instance {
	return backends.Instance{Ref: ctRef, Type: backends.TypeCT, State: b.state, CPUs: 1, MemoryMiB: 512, DiskMiB: 1024,
		Facts: []backends.Fact{{Label: "Image", Value: "docker.io/library/debian:bookworm"}}}
}
func (b *ctBackend) List(context.Context) ([]backends.Instance, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return []backends.Instance{b.inst(), vmInst()}, nil
}
func (b *ctBackend) Get(_ context.Context, ref backends.InstanceRef) (backends.Instance, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ref {
	case ctRef:
		return b.inst(), nil
	case vmRef:
		return vmInst(), nil
	}
	return backends.Instance{}, backends.NotFoundf("no %s", ref)
}
func (b *ctBackend) Create(context.Context, backends.Spec) (backends.Instance, error) {
	return backends.Instance{}, backends.Invalidf("not here")
}
func (b *ctBackend) Power(_ context.Context, _ backends.InstanceRef, a backends.Action) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case a == backends.ActionStart && b.state == backends.StateStopped:
		b.state = backends.StateRunning
	case (a == backends.ActionStop || a == backends.ActionShutdown) && b.state == backends.StateRunning:
		b.state = backends.StateStopped
	case a == backends.ActionPause:
		return backends.Refuse(backends.KindKubeVirt, "pause", "stop it instead")
	default:
		return backends.Conflictf("box is %s", b.state)
	}
	return nil
}
func (b *ctBackend) Delete(context.Context, backends.InstanceRef) error { return nil }
func (b *ctBackend) Consoles(_ context.Context, ref backends.InstanceRef) ([]backends.ConsoleKind, error) {
	if ref == vmRef {
		return nil, backends.Refuse(backends.KindKubeVirt, "console", "use virtctl")
	}
	return []backends.ConsoleKind{backends.ConsoleSerial}, nil
}
func (b *ctBackend) DialConsole(context.Context, backends.InstanceRef, backends.ConsoleKind) (net.Conn, error) {
	return nil, backends.Refuse(backends.KindKubeVirt, "console", "not in this test")
}

func ctEnv(t *testing.T) (*env, *ctBackend) {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := fleet.New(fleet.Options{Logger: log})
	b := &ctBackend{state: backends.StateRunning}
	if err := f.Add(b); err != nil {
		t.Fatal(err)
	}
	f.Refresh(ctx)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tm := tasks.New(st, tasks.Options{Logger: log})
	t.Cleanup(tm.Close)
	assets, err := static.New()
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Identify(auth.NewResolver(auth.Config{}, auth.NewPolicy(nil, false), auth.ResolverOptions{})))
	ui.Mount(r, ui.Deps{Instances: instances.New(f, tm, st, log), Fleet: f, Tasks: tm, Assets: assets, Log: log})
	return &env{t: t, fleet: f, tasks: tm, handler: r}, b
}

// ctActions returns the names of the page's action forms, checking each
// is a real POST form to its own action.
func ctActions(t *testing.T, d *goquery.Document, page string) []string {
	t.Helper()
	var out []string
	d.Find(testid("actions") + " form").Each(func(_ int, f *goquery.Selection) {
		name := strings.TrimPrefix(f.Find("button").AttrOr("data-testid", ""), "action-")
		if f.AttrOr("method", "") != "post" || f.AttrOr("action", "") != page+"/"+name || f.AttrOr("hx-post", "") != page+"/"+name {
			t.Errorf("form %q is not a POST form with hx-post to %s/%s", name, page, name)
		}
		out = append(out, name)
	})
	return out
}

// TestCTPage: a CT's page offers stop, restart, its shell and delete
// while it runs (never pause), start once stopped, with the same real
// forms and htmx swaps as a VM's.
func TestCTPage(t *testing.T) {
	e, _ := ctEnv(t)
	page := "/vm/" + ctRef.String()

	d := doc(t, e.get(page, ""), http.StatusOK)
	if got := ctActions(t, d, page); !slices.Equal(got, []string{"stop", "restart"}) {
		t.Errorf("actions of a running CT = %q, want stop, restart", got)
	}
	if got := d.Find(testid("action-console")).AttrOr("href", ""); got != "/console/"+ctRef.String()+"?kind=serial" {
		t.Errorf("console link = %q, want the serial console (a shell)", got)
	}
	if d.Find(testid("action-delete")).Length() != 1 || d.Find(testid("ct-note")).Length() != 1 {
		t.Errorf("a CT's page lacks its delete control or its note")
	}
	if got := strings.TrimSpace(d.Find(testid("fact-Image")).Text()); got != "docker.io/library/debian:bookworm" {
		t.Errorf("image fact = %q", got)
	}

	rec := e.post(page+"/stop", "section#summary")
	d = doc(t, rec, http.StatusOK)
	if rec.Header().Get("HX-Trigger") != "corral:tasks" || strings.Contains(rec.Body.String(), "<html") {
		t.Errorf("stop with htmx: HX-Trigger %q; want the #summary partial and the tasks event", rec.Header().Get("HX-Trigger"))
	}
	if got := strings.TrimSpace(d.Find(testid("notice")).Text()); got != "Stop: done." {
		t.Errorf("notice = %q", got)
	}
	if got := ctActions(t, d, page); !slices.Equal(got, []string{"start"}) {
		t.Errorf("actions of a stopped CT = %q, want start", got)
	}
	if d.Find(testid("action-console")).Length() != 0 {
		t.Errorf("a stopped CT offers a console")
	}

	// Without JavaScript: 303 back to the page.
	if rec := e.post(page+"/start", ""); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != page {
		t.Errorf("plain POST start: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	// A pause (not offered) is refused with a remedy, into #flash.
	if rec := e.post(page+"/pause", "section#summary"); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "stop it instead") {
		t.Errorf("pause a CT: %d %.200s", rec.Code, rec.Body.String())
	}
	d = doc(t, e.get(page+"/delete", ""), http.StatusOK)
	if d.Find(testid("confirm-delete")).Length() != 1 {
		t.Errorf("the delete confirmation of a CT is missing")
	}

	// A running VM whose backend refuses its console gets no console link
	// (and keeps the VM's actions).
	d = doc(t, e.get("/vm/"+vmRef.String(), ""), http.StatusOK)
	if d.Find(testid("action-console")).Length() != 0 || d.Find(testid("ct-note")).Length() != 0 {
		t.Errorf("a VM whose console is refused shows a console link or the CT note")
	}
	if got := texts(d, testid("actions")+" button"); !slices.Contains(got, "Pause") {
		t.Errorf("the VM's actions %q lost pause", got)
	}
}
