package static_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"

	"github.com/corral-dev/corral/static"
)

func TestAssets(t *testing.T) {
	a, err := static.New()
	if err != nil {
		t.Fatal(err)
	}
	css := a.Path("app.css")
	if !regexp.MustCompile(`^/static/app\.[0-9a-f]{8,}\.css$`).MatchString(css) {
		t.Fatalf("Path(app.css) = %q, want a content-hashed URL", css)
	}
	if a.Path("nothing.js") != "" {
		t.Error("Path of a missing file is not empty")
	}
	want, err := os.ReadFile("app.css")
	if err != nil {
		t.Fatal(err)
	}
	h := a.Handler()

	for _, tc := range []struct {
		name, accept, encoding string
		decode                 func(io.Reader) (io.Reader, error)
	}{
		{"identity", "", "", func(r io.Reader) (io.Reader, error) { return r, nil }},
		{"gzip", "gzip, deflate", "gzip", func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }},
		{"brotli", "gzip, br", "br", func(r io.Reader) (io.Reader, error) { return brotli.NewReader(r), nil }},
		{"brotli refused", "br;q=0, gzip", "gzip", func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, css, nil)
			if tc.accept != "" {
				req.Header.Set("Accept-Encoding", tc.accept)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d", rec.Code)
			}
			hd := rec.Header()
			if hd.Get("Content-Encoding") != tc.encoding {
				t.Errorf("Content-Encoding = %q, want %q", hd.Get("Content-Encoding"), tc.encoding)
			}
			if !strings.HasPrefix(hd.Get("Content-Type"), "text/css") {
				t.Errorf("Content-Type = %q", hd.Get("Content-Type"))
			}
			if hd.Get("Cache-Control") != "public, max-age=31536000, immutable" || hd.Get("Vary") != "Accept-Encoding" || hd.Get("ETag") == "" {
				t.Errorf("caching headers: %v", hd)
			}
			r, err := tc.decode(rec.Body)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("body differs from app.css (err %v)", err)
			}

			again := httptest.NewRequest(http.MethodGet, css, nil)
			again.Header.Set("Accept-Encoding", tc.accept)
			again.Header.Set("If-None-Match", hd.Get("ETag"))
			rec = httptest.NewRecorder()
			h.ServeHTTP(rec, again)
			if rec.Code != http.StatusNotModified {
				t.Errorf("If-None-Match: status %d, want 304", rec.Code)
			}
		})
	}

	stale := strings.Replace(css, ".css", "0.css", 1)
	for _, p := range []string{stale, "/static/app.css", "/static/app.00000000.css", "/static/"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, rec.Code)
		}
	}
}

// TestBuiltFiles checks the files npm's build step copies, when it ran:
// htmx and its SSE extension, and IronRDP's web component and RDP
// backend, must be embedded and served as JavaScript.
func TestBuiltFiles(t *testing.T) {
	if _, err := os.Stat("dist/htmx.min.js"); err != nil {
		requireBuilt(t, "static/dist is empty: run `npm ci && npm run build` in static/")
	}
	a, err := static.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"htmx.min.js", "hx-sse.min.js", "app.js", "rdp.js", "iron-remote-desktop.js", "iron-remote-desktop-rdp.js"} {
		p := a.Path(name)
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Header().Get("Content-Type"), "javascript") {
			t.Errorf("%s at %q: %d %q", name, p, rec.Code, rec.Header().Get("Content-Type"))
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
