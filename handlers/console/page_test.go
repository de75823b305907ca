package console_test

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

func get(t *testing.T, u string, header http.Header) (*http.Response, *goquery.Document) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, doc
}

func TestConsolePage(t *testing.T) {
	g := newRig(t, rigOptions{})
	tid := func(id string) string { return `[data-testid="` + id + `"]` }

	for _, tc := range []struct {
		name, query, element, socket, other string
	}{
		{"vnc by default", "", "corral-vnc", "/ws/vnc/" + refVM, "serial"},
		{"vnc", "?kind=vnc", "corral-vnc", "/ws/vnc/" + refVM, "serial"},
		{"serial", "?kind=serial", "corral-serial", "/ws/serial/" + refVM, "vnc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, doc := get(t, g.srv.URL+"/console/"+refVM+tc.query, nil)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d", res.StatusCode)
			}
			el := doc.Find(tc.element)
			if el.Length() != 1 {
				t.Fatalf("%d <%s> elements; want 1", el.Length(), tc.element)
			}
			if src, _ := el.Attr("src"); src != tc.socket {
				t.Errorf("src = %q; want %q", src, tc.socket)
			}
			if href, _ := doc.Find(tid("console-back")).Attr("href"); href != "/vm/"+refVM {
				t.Errorf("link back to the VM page: %q", href)
			}
			if href, _ := doc.Find(tid("console-kind-" + tc.other)).Attr("href"); href != "/console/"+refVM+"?kind="+tc.other {
				t.Errorf("link to the %s console: %q", tc.other, href)
			}
			script, _ := doc.Find(`script[type="module"]`).Attr("src")
			if script == "" || script != g.assets.Path("console.js") {
				t.Errorf("console.js module script: %q", script)
			}
			if doc.Find(tid("console-notice")).Length() != 0 {
				t.Error("a running instance's console shows a notice")
			}
		})
	}

	t.Run("htmx kind switch gets the fragment", func(t *testing.T) {
		res, doc := get(t, g.srv.URL+"/console/"+refVM+"?kind=serial", http.Header{"Hx-Request": {"true"}, "Hx-Target": {"section#console"}})
		if res.StatusCode != http.StatusOK || doc.Find("html > head title").Length() != 0 {
			t.Fatalf("status %d; want the #console fragment alone", res.StatusCode)
		}
		if doc.Find("section#console corral-serial").Length() != 1 {
			t.Fatal("the fragment has no serial console")
		}
	})

	t.Run("embedded in another page", func(t *testing.T) {
		res, doc := get(t, g.srv.URL+"/console/"+refVM+"?kind=serial&embed=1", nil)
		if res.StatusCode != http.StatusOK || doc.Find("corral-serial").Length() != 1 {
			t.Fatalf("status %d; want the page with its serial console", res.StatusCode)
		}
		if n := doc.Find("header.top").Length() + doc.Find(tid("console-back")).Length() + doc.Find(tid("console-kinds")).Length(); n != 0 {
			t.Fatalf("the embedded page shows the header, the crumbs or the kinds (%d elements)", n)
		}
	})

	t.Run("stopped instance", func(t *testing.T) {
		res, doc := get(t, g.srv.URL+"/console/"+refOff, nil)
		if res.StatusCode != http.StatusOK || doc.Find(tid("console-notice")).Length() != 1 || doc.Find("corral-vnc").Length() != 1 {
			t.Fatalf("status %d; want the page, its notice and an element that connects once it runs", res.StatusCode)
		}
	})

	for _, tc := range []struct {
		name, path string
		status     int
	}{
		{"unknown kind", "/console/" + refVM + "?kind=spice", http.StatusBadRequest},
		{"bad embed", "/console/" + refVM + "?embed=yes", http.StatusBadRequest},
		{"kind the instance does not offer", "/console/" + refVM + "?kind=rdp", http.StatusBadRequest},
		{"backend without consoles", "/console/" + refPlain, http.StatusBadRequest},
		{"unknown instance", "/console/sim/cons/-/ghost", http.StatusNotFound},
		{"unknown context", "/console/sim/nowhere/-/vm", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, doc := get(t, g.srv.URL+tc.path, nil)
			if res.StatusCode != tc.status || doc.Find(tid("error")).Length() != 1 {
				t.Fatalf("status %d; want %d and the error page", res.StatusCode, tc.status)
			}
		})
	}
}

// TestNoVNCModulesResolve loads noVNC's module graph as a browser would:
// from the hashed rfb.js URL, following every relative import. A file
// left out of the tree, or a hash scheme that breaks relative URLs, fails.
func TestNoVNCModulesResolve(t *testing.T) {
	if _, err := os.Stat("../../static/dist/novnc/core/rfb.js"); err != nil {
		requireBuilt(t, "static/dist has no noVNC: run `npm ci && npm run build` in static/")
	}
	g := newRig(t, rigOptions{})
	root := g.assets.Path("novnc/core/rfb.js")
	if !regexp.MustCompile(`^/static/novnc\.[0-9a-f]{12}/core/rfb\.js$`).MatchString(root) {
		t.Fatalf("Path(novnc/core/rfb.js) = %q; want /static/novnc.HASH/core/rfb.js", root)
	}
	imports := regexp.MustCompile(`(?m)(?:^import|\bfrom)\s*["'](\.{1,2}/[^"']+)["']`)
	base, _ := url.Parse(g.srv.URL)
	seen := map[string]bool{}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		res, err := http.Get(base.ResolveReference(&url.URL{Path: p}).String())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/javascript") {
			t.Fatalf("GET %s: %d %q", p, res.StatusCode, res.Header.Get("Content-Type"))
		}
		if cc := res.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("GET %s: Cache-Control %q", p, cc)
		}
		for _, m := range imports.FindAllStringSubmatch(string(body), -1) {
			ref, _ := url.Parse(p)
			queue = append(queue, ref.ResolveReference(&url.URL{Path: m[1]}).Path)
		}
	}
	if len(seen) < 20 || !seen[strings.TrimSuffix(root, "core/rfb.js")+"vendor/pako/lib/zlib/inflate.js"] {
		t.Fatalf("followed %d modules; want noVNC's graph including vendor/pako", len(seen))
	}
	for _, name := range []string{"xterm.mjs", "addon-fit.mjs", "xterm.css", "console.js", "console.css"} {
		if g.assets.Path(name) == "" {
			t.Errorf("%s is not embedded", name)
		}
	}
}

// requireBuilt skips a test that needs the npm build step's output, or
// fails it under CORRAL_REQUIRE_ENGINES=1 (make ci runs the build first,
// so a missing file there is a broken build, not a missing engine).
func requireBuilt(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CORRAL_REQUIRE_ENGINES") == "1" {
		t.Fatalf("engine: %s", why)
	}
	t.Skipf("engine: %s", why)
}
