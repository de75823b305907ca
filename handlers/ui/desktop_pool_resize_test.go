package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/views"
)

// TestDesktopPoolResize: the pools page's size form (admins): to htmx
// the pools region with the notice and the new members; without
// JavaScript a redirect with the notice; a shrink below the claimed
// members is a 400 shown in #flash; users get 403; the page says how a
// CT pool is resized.
func TestDesktopPoolResize(t *testing.T) {
	u := newDesktopsUI(t, nil)
	ctx := context.Background()
	if _, err := u.svc.CreatePool(ctx, tasks.Origin{Actor: "test", Surface: "cli"}, vdi.PoolRequest{Name: "desk", Golden: "sim/lab/-/gold", Size: 2}); err != nil {
		t.Fatal(err)
	}
	d := doc(t, u.do("boss@example.com", http.MethodGet, "/desktops/pools", "", nil), http.StatusOK)
	if v, _ := d.Find(`[data-pool="vm/-/desk"] [data-testid="pool-resize-size"]`).Attr("value"); v != "2" {
		t.Fatalf("the resize form's size = %q, want 2", v)
	}
	if !strings.Contains(d.Find(`[data-testid="ct-pool-resize-hint"]`).Text(), "corral vdi ct-pool apply POOL -n NAMESPACE --size N") {
		t.Fatal("the page does not say how a CT pool is resized")
	}
	if rec := u.do("alice@example.com", http.MethodPost, "/desktops/pools/resize", "", url.Values{"pool": {"vm/-/desk"}, "size": {"3"}}); rec.Code != http.StatusForbidden {
		t.Fatalf("a user's resize = %d, want 403", rec.Code)
	}
	for _, bad := range []url.Values{{"pool": {"vm/-/desk"}, "size": {"many"}}, {"size": {"3"}}, {"pool": {"vm/-/desk"}, "size": {"0"}}} {
		if rec := u.do("boss@example.com", http.MethodPost, "/desktops/pools/resize", "", bad); rec.Code != http.StatusBadRequest {
			t.Fatalf("resize %v = %d, want 400", bad, rec.Code)
		}
	}
	rec := u.do("boss@example.com", http.MethodPost, "/desktops/pools/resize", "div#admin-pools", url.Values{"pool": {"vm/-/desk"}, "size": {"3"}})
	d = doc(t, rec, http.StatusOK)
	if strings.Contains(rec.Body.String(), "<html") || d.Find(`#admin-pools [data-testid="member-row"]`).Length() != 3 ||
		!strings.Contains(d.Find(`[data-testid="pools-notice"]`).Text(), "Pool vm/-/desk has 3 members (was 2). Added vm/-/desk-3.") {
		t.Fatalf("htmx grow to 3:\n%s", rec.Body.String())
	}
	if got := rec.Header().Get("HX-Trigger"); got != "corral:tasks" {
		t.Errorf("htmx grow: HX-Trigger %q, want corral:tasks (the activity panel shows the task)", got)
	}
	// Two claims; a shrink to 1 is refused into #flash, a shrink to 2
	// without JavaScript redirects with the notice.
	for _, who := range []string{"alice@example.com", "bob@example.com"} {
		if _, err := u.svc.Claim(ctx, auth.Identity{Login: who, Via: auth.ViaTailscale}, "dashboard", "vm/-/desk"); err != nil {
			t.Fatal(err)
		}
	}
	rec = u.do("boss@example.com", http.MethodPost, "/desktops/pools/resize", "div#admin-pools", url.Values{"pool": {"vm/-/desk"}, "size": {"1"}})
	if rec.Code != http.StatusBadRequest || rec.Header().Get("HX-Retarget") != "#flash" || !strings.Contains(rec.Body.String(), "the smallest size now is 2") {
		t.Fatalf("htmx shrink below the claims = %d %q\n%s", rec.Code, rec.Header().Get("HX-Retarget"), rec.Body.String())
	}
	rec = u.do("boss@example.com", http.MethodPost, "/desktops/pools/resize", "", url.Values{"pool": {"vm/-/desk"}, "size": {"2"}})
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("shrink to 2 = %d: %s", rec.Code, rec.Body.String())
	}
	d = doc(t, u.do("boss@example.com", http.MethodGet, rec.Header().Get("Location"), "", nil), http.StatusOK)
	if d.Find(`[data-testid="member-row"]`).Length() != 2 || !strings.Contains(d.Find(`[data-testid="pools-notice"]`).Text(), "has 2 members (was 3). Removed") {
		t.Fatalf("after the shrink:\n%s", d.Find("main").Text())
	}
	for _, h := range []string{"alice@example.com", "bob@example.com"} {
		if !strings.Contains(d.Find(`[data-testid="admin-pool"]`).Text(), h) {
			t.Errorf("the claimed member of %s is gone after the shrink", h)
		}
	}
}

// TestDesktopPoolsFormsAdminsOnly: the pools page, which the peer (a
// privileged caller, not an admin) may read, shows the create, resize
// and delete forms to admins only: anyone else would get 403 from them.
func TestDesktopPoolsFormsAdminsOnly(t *testing.T) {
	for _, admin := range []bool{true, false} {
		p := views.DesktopPools{Page: views.Page{Title: "Desktop pools", User: views.User{Display: "peer", Via: "peer", Admin: admin}}, MaxSize: vdi.MaxPoolSize,
			Pools: []views.DesktopPoolAdmin{{ID: "vm/-/desk", Golden: "sim/lab/-/gold", Mode: "persistent", Size: 1,
				Members: []views.DesktopMemberRow{{Desktop: "vm/-/desk-1", Ref: "sim/lab/-/desk-1", State: "stopped", Holder: "free"}}}}}
		rec := httptest.NewRecorder()
		if err := views.DesktopPoolsPage(p).Render(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		d := doc(t, rec, http.StatusOK)
		if d.Find(`[data-testid="member-row"]`).Length() != 1 {
			t.Fatalf("admin %v: the pool's member is not shown", admin)
		}
		for _, form := range []string{"pool-create", "pool-resize-form", "pool-delete"} {
			if n := d.Find(`[data-testid="` + form + `"]`).Length(); (n > 0) != admin {
				t.Errorf("admin %v: %d %s", admin, n, form)
			}
		}
		if v, _ := d.Find(`[data-testid="pool-resize-size"]`).Attr("max"); admin && v != "200" {
			t.Errorf("the resize form's max = %q, want 200", v)
		}
	}
}
