package ui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/handlers/ui"
	"github.com/corral-dev/corral/static"
	"github.com/corral-dev/corral/store"
)

// desktopsUI is the desktops pages over a VDI service on a simulated
// context lab (with the stopped golden VM gold), for the logins given.
type desktopsUI struct {
	svc *vdi.Service
	lab *sim.Backend
	tm  *tasks.Manager
	r   http.Handler
}

func newDesktopsUI(t *testing.T, ct vdi.CTPools) *desktopsUI {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	lab := sim.New(sim.Options{Context: "lab"})
	if _, err := lab.Create(ctx, backends.Spec{Name: "gold", Type: backends.TypeVM, CPUs: 1, MemoryMiB: 512}); err != nil {
		t.Fatal(err)
	}
	f := fleet.New(fleet.Options{Logger: log})
	f.Add(lab)
	f.Refresh(ctx)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tm := tasks.New(st, tasks.Options{Logger: log})
	t.Cleanup(tm.Close)
	svc := vdi.New(vdi.Options{Fleet: f, Tasks: tm, Store: st, Log: log, CT: ct})
	assets, err := static.New()
	if err != nil {
		t.Fatal(err)
	}
	ac := auth.Config{Admins: []string{"boss@example.com"}, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.1/32")}}
	policy := auth.NewPolicy(ac.Admins, false)
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Identify(auth.NewResolver(ac, policy, auth.ResolverOptions{})))
	ui.Mount(r, ui.Deps{Instances: instances.New(f, tm, st, log), Fleet: f, Tasks: tm, Assets: assets, Log: log,
		Policy: policy, Audit: auth.NewAuditor(st, log), VDI: svc})
	return &desktopsUI{svc: svc, lab: lab, tm: tm, r: r}
}

// do sends a request as login; hxTarget, when set, makes it an htmx
// request for that target.
func (u *desktopsUI) do(login, method, target, hxTarget string, form url.Values) *httptest.ResponseRecorder {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, target, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if login != "" {
		req.Header.Set(auth.HeaderTailscaleLogin, login)
	}
	if hxTarget != "" {
		req.Header.Set("HX-Request", "true")
		req.Header.Set("HX-Target", hxTarget)
	}
	rec := httptest.NewRecorder()
	u.r.ServeHTTP(rec, req)
	return rec
}

// oneCT is a CT seam with one claimed, running CT desktop: logic for the
// page only; the seam itself is tested against the API server
// (app/vdi/ctpool TestCTConnect).
type oneCT struct {
	claim vdi.Claim
	ref   string
}

func (o oneCT) Summaries(context.Context) ([]vdi.PoolSummary, error) {
	return []vdi.PoolSummary{{ID: "ct/ns/desk", Ephemeral: true, Members: 1, Claimed: 1}}, nil
}
func (o oneCT) Claim(context.Context, vdi.PoolID, string) (vdi.Claim, error, error) {
	return vdi.Claim{}, nil, backends.Conflictf("pool ct/ns/desk has no free members")
}
func (o oneCT) Claims(context.Context) ([]vdi.Claim, error) { return []vdi.Claim{o.claim}, nil }
func (o oneCT) Get(_ context.Context, d vdi.DesktopID) (vdi.Claim, error) {
	if d != o.claim.Desktop {
		return vdi.Claim{}, vdi.ErrNoClaim
	}
	return o.claim, nil
}
func (o oneCT) Members(_ context.Context, cs []vdi.Claim) []vdi.MemberView {
	out := make([]vdi.MemberView, len(cs))
	for i := range cs {
		out[i] = vdi.MemberView{Ref: o.ref, Phase: "Ready", Running: true}
	}
	return out
}
func (o oneCT) Start(context.Context, vdi.Claim) error   { return nil }
func (o oneCT) Release(context.Context, vdi.Claim) error { return nil }
func (o oneCT) Update(_ context.Context, c vdi.Claim) (vdi.Claim, error) {
	return c, nil
}
func (o oneCT) Desktop(_ context.Context, ref backends.InstanceRef) (vdi.DesktopID, bool) {
	return o.claim.Desktop, ref.String() == o.ref
}

// TestDesktopsConnectCT: the desktops page's Connect on a CT desktop
// shows its terminal in the page (it answered "in no pool" before).
func TestDesktopsConnectCT(t *testing.T) {
	now := time.Now()
	ct := oneCT{claim: vdi.Claim{Desktop: vdi.DesktopID{Kind: "ct", Namespace: "ns", Member: "desk-1"}, Pool: "desk", Holder: "alice@example.com",
		Session: "s1", Acquired: now, Renewed: now, Expires: now.Add(time.Hour), Version: "1"}, ref: "kubevirt/test/ns/desk-1"}
	u := newDesktopsUI(t, ct)
	d := doc(t, u.do("alice@example.com", http.MethodGet, "/desktops", "", nil), http.StatusOK)
	link := d.Find(`[data-testid="my-desktops"] [data-desktop="ct/ns/desk-1"] [data-testid="desktop-connect"]`)
	href, _ := link.Attr("hx-get")
	if link.Length() != 1 || href != "/desktops?connect=ct%2Fns%2Fdesk-1" {
		t.Fatalf("the CT desktop's Connect: %d links, hx-get %q\n%s", link.Length(), href, d.Find("main").Text())
	}
	rec := u.do("alice@example.com", http.MethodGet, href, "section#desktop-console", nil)
	d = doc(t, rec, http.StatusOK)
	frame, _ := d.Find(`[data-testid="desktop-frame"]`).Attr("src")
	if got := strings.TrimSpace(d.Find(`[data-testid="connect-protocol"]`).Text()); got != "TERMINAL" || frame != "/console/kubevirt/test/ns/desk-1?kind=serial&embed=1" ||
		d.Find(`[data-testid="connect-error"]`).Length() != 0 {
		t.Fatalf("the CT desktop's console region: protocol %q, frame %q\n%s", got, frame, rec.Body.String())
	}
	rec = u.do("bob@example.com", http.MethodGet, href, "section#desktop-console", nil)
	if got := doc(t, rec, http.StatusOK).Find(`[data-testid="connect-error"]`).Text(); !strings.Contains(got, "not yours") {
		t.Fatalf("bob's connect to alice's CT desktop: %q", got)
	}
}
