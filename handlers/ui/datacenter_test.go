package ui_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
)

func TestDatacenterFullPageAndFragment(t *testing.T) {
	e := labEnv(t)

	full := e.get("/", "")
	d := doc(t, full, http.StatusOK)
	if got := full.Header().Get("Vary"); !strings.Contains(got, "HX-Request") {
		t.Errorf("Vary = %q, want HX-Request", got)
	}
	if d.Find(testid("brand")).Text() != "Corral" {
		t.Error("the header does not name Corral")
	}
	if n := d.Find(testid("instance-row")).Length(); n != 30 {
		t.Errorf("%d rows, want 30", n)
	}
	if got := texts(d, testid("context")+" .ctx-name"); !slices.Equal(got, []string{"sim/lab"}) {
		t.Errorf("contexts tree = %q", got)
	}
	if got := d.Find(testid("context") + " .ctx-counts").Text(); got != "30 instances · 18 running" {
		t.Errorf("context counts = %q", got)
	}
	if d.Find(testid("activity")).Length() != 1 || d.Find(`[hx-sse\:connect]`).Length() != 1 {
		t.Error("the full page lacks the activity panel or the event stream")
	}

	for _, tc := range []struct {
		name, target, want string
	}{
		{"inventory", "section#inventory", "inventory"},
		{"default", "-", "inventory"},
		{"contexts", "nav#contexts", "contexts"},
		{"banner", "div#banner", "banner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := e.get("/", tc.target)
			body := rec.Body.String()
			if strings.Contains(body, "<html") || strings.Contains(body, "<header") {
				t.Fatalf("fragment response carries the page: %.300s", body)
			}
			fd := doc(t, rec, http.StatusOK)
			if got, _ := fd.Find("body > *").First().Attr("id"); got != tc.want {
				t.Errorf("fragment root id = %q, want %q", got, tc.want)
			}
			if !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
				t.Errorf("Content-Type = %q", rec.Header().Get("Content-Type"))
			}
		})
	}
}

func TestDatacenterFilters(t *testing.T) {
	e := labEnv(t)
	for _, tc := range []struct {
		name, query string
		rows        int
		check       func(row map[string]string) bool
	}{
		{"state", "?state=stopped", 6, func(r map[string]string) bool { return r["state"] == "stopped" }},
		{"search", "?q=web-", 4, func(r map[string]string) bool { return strings.HasPrefix(r["name"], "web-") }},
		{"tag", "?tag=prod", 10, func(r map[string]string) bool { return strings.Contains(r["tags"], "prod") }},
		{"backend and context", "?backend=sim&context=sim%2Flab", 30, func(r map[string]string) bool { return r["context"] == "sim/lab" }},
		{"no match", "?q=nothing-like-this", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := doc(t, e.get("/"+tc.query, "section#inventory"), http.StatusOK)
			rows := tableRows(d)
			if len(rows) != tc.rows {
				t.Fatalf("%d rows, want %d", len(rows), tc.rows)
			}
			for _, r := range rows {
				if !tc.check(r) {
					t.Errorf("row %v does not match %s", r, tc.query)
				}
			}
			if tc.rows == 0 && d.Find(testid("no-rows")).Length() != 1 {
				t.Error("an empty result does not say so")
			}
		})
	}
}

func TestDatacenterSortAndPage(t *testing.T) {
	e := newEnv(t, fleet.Options{}, sim.New(sim.Options{Context: "lab", Size: 120}))
	d := doc(t, e.get("/?sort=memory&desc=1", ""), http.StatusOK)
	rows := tableRows(d)
	if len(rows) != 50 {
		t.Fatalf("%d rows on page 1, want 50", len(rows))
	}
	if rows[0]["memory"] != "8Gi" || rows[49]["memory"] == "512Mi" {
		t.Errorf("sorted by memory descending, first %q, last %q", rows[0]["memory"], rows[49]["memory"])
	}
	if got, _ := d.Find(testid("sort-memory")).Attr("href"); got != "/?sort=memory" {
		t.Errorf("the sorted column's link = %q, want it to flip the order", got)
	}
	if got, _ := d.Find(`th[aria-sort]`).Attr("aria-sort"); got != "descending" {
		t.Errorf("aria-sort = %q", got)
	}
	next, _ := d.Find(testid("page-next")).Attr("href")
	if next != "/?desc=1&page=2&sort=memory" {
		t.Fatalf("next page link = %q", next)
	}

	p2 := doc(t, e.get(next, "section#inventory"), http.StatusOK)
	if got := p2.Find(testid("page-info")).Text(); got != "page 2 of 3" {
		t.Errorf("page info = %q", got)
	}
	if got := p2.Find(testid("count")).Text(); got != "51–100 of 120 instances" {
		t.Errorf("count = %q", got)
	}
	if tableRows(p2)[0]["name"] == rows[0]["name"] {
		t.Error("page 2 starts with page 1's first row")
	}
	if self, _ := p2.Find("#inventory").Attr("hx-get"); self != next {
		t.Errorf("the live re-fetch URL is %q, want the current query %q", self, next)
	}

	byName := tableRows(doc(t, e.get("/?sort=name", ""), http.StatusOK))
	names := make([]string, len(byName))
	for i, r := range byName {
		names[i] = r["name"]
	}
	if !slices.IsSorted(names) {
		t.Errorf("names are not sorted: %q", names[:5])
	}
}

func TestDatacenterBadInput(t *testing.T) {
	e := labEnv(t)
	for _, tc := range []struct{ query, want string }{
		{"?sort=colour", `unknown sort key "colour"`},
		{"?state=melting", `unknown state "melting"`},
		{"?page=zero", `page "zero" is not accepted`},
	} {
		t.Run(tc.query, func(t *testing.T) {
			d := doc(t, e.get("/"+tc.query, ""), http.StatusBadRequest)
			if got := d.Find(testid("error-message")).Text(); !strings.Contains(got, tc.want) {
				t.Errorf("error page says %q, want %q", got, tc.want)
			}
			if d.Find(testid("brand")).Length() != 1 {
				t.Error("the error page has no frame")
			}

			rec := e.get("/"+tc.query, "section#inventory")
			pd := doc(t, rec, http.StatusBadRequest)
			if rec.Header().Get("HX-Retarget") != "#flash" || rec.Header().Get("HX-Reswap") != "innerHTML" {
				t.Errorf("htmx error is not aimed at #flash: %v", rec.Header())
			}
			if got := pd.Find(testid("error-message")).Text(); !strings.Contains(got, tc.want) {
				t.Errorf("error partial says %q, want %q", got, tc.want)
			}
			if strings.Contains(rec.Body.String(), "<html") {
				t.Error("the htmx error response is a whole page")
			}
		})
	}
}

func TestDatacenterFailingContext(t *testing.T) {
	failing := sim.New(sim.Options{Context: "lab", Size: 10, Fail: func(op string) error {
		return backends.Unavailable("lab", errors.New("secret-host:1234 refused"))
	}})
	e := newEnv(t, fleet.Options{}, failing, sim.New(sim.Options{Context: "prod", Size: 5}))

	for _, target := range []string{"", "nav#contexts", "div#banner"} {
		rec := e.get("/", target)
		if strings.Contains(rec.Body.String(), "secret-host") {
			t.Fatalf("the page (target %q) leaks the backend's error text", target)
		}
	}
	d := doc(t, e.get("/", ""), http.StatusOK)
	lab := d.Find(testid("context") + `[data-context="sim/lab"]`)
	if h, _ := lab.Attr("data-health"); h != "down" {
		t.Errorf("failing context health = %q, want down", h)
	}
	if !lab.HasClass("ctx-down") {
		t.Error("the failing context is not marked")
	}
	if got := lab.Find(testid("context-error")).Text(); got != "context lab is unreachable" {
		t.Errorf("context error = %q", got)
	}
	warn := d.Find(testid("warning-context"))
	if warn.Length() != 1 || !strings.Contains(warn.Text(), "sim/lab") || !strings.Contains(warn.Text(), "context lab is unreachable") {
		t.Errorf("warning = %q, want it to name sim/lab and its error", warn.Text())
	}
	if n := len(tableRows(d)); n != 5 {
		t.Errorf("%d rows, want the 5 of the healthy context", n)
	}
}

// tableRows reads the inventory table into maps keyed by column.
func tableRows(d *goquery.Document) []map[string]string {
	keys := []string{"name", "state", "backend", "context", "cpu", "memory", "disk", "ip", "node", "tags"}
	var out []map[string]string
	d.Find(testid("instance-row")).Each(func(_ int, tr *goquery.Selection) {
		r := map[string]string{"ref": tr.AttrOr("data-ref", "")}
		tr.Find("td").Each(func(i int, td *goquery.Selection) { r[keys[i]] = strings.TrimSpace(td.Text()) })
		out = append(out, r)
	})
	return out
}
