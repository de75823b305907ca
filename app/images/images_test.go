package images_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/corral-dev/corral/app/images"
	"github.com/corral-dev/corral/backends"
)

func TestResolve(t *testing.T) {
	local := filepath.Join(t.TempDir(), "disk.qcow2")
	os.WriteFile(local, []byte("x"), 0o600)
	r := &images.Resolver{Catalog: []images.Entry{{Name: "tiny", URL: "http://example.test/tiny.qcow2", SHA256: strings.Repeat("ab", 32)}}}
	if s, err := r.Resolve("tiny"); err != nil || !s.Remote() || s.Entry == nil || s.SHA256 == "" {
		t.Fatalf("catalog name: %+v, %v", s, err)
	}
	sum := strings.Repeat("0f", 32)
	if s, err := r.Resolve("https://example.test/a.img#sha256=" + sum); err != nil || s.URL != "https://example.test/a.img" || s.SHA256 != sum {
		t.Fatalf("URL with checksum: %+v, %v", s, err)
	}
	if s, err := r.Resolve(local); err != nil || s.Remote() || s.Path != local {
		t.Fatalf("local path: %+v, %v", s, err)
	}
	for _, bad := range []string{"debian", "relative/disk.qcow2", "/no/such/file.qcow2", "https://example.test/a.img#sha256=xyz", t.TempDir()} {
		_, err := r.Resolve(bad)
		if !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("Resolve(%q) = %v, want ErrInvalid", bad, err)
			continue
		}
		if msg := backends.SafeMessage(err); !strings.Contains(msg, "tiny") && !strings.Contains(msg, "sha256") {
			t.Errorf("Resolve(%q) message %q names neither the catalog nor the checksum rule", bad, msg)
		}
	}
}

func TestFetch(t *testing.T) {
	body := strings.Repeat("qcow2-bytes ", 50000)
	sum := sha256.Sum256([]byte(body))
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(body))
	}))
	defer srv.Close()
	r := &images.Resolver{Dir: t.TempDir()}
	ctx := context.Background()
	src, err := r.Resolve(srv.URL + "/img#sha256=" + hex.EncodeToString(sum[:]))
	if err != nil {
		t.Fatal(err)
	}
	var last, calls int64
	path, err := r.Fetch(ctx, src, func(done, total int64) { last = done; calls++ })
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if data, _ := os.ReadFile(path); string(data) != body {
		t.Fatalf("downloaded %d bytes, want %d", len(data), len(body))
	}
	if last != int64(len(body)) || calls < 1 {
		t.Fatalf("progress: last %d after %d calls", last, calls)
	}
	// The second fetch of the same URL comes from the cache.
	if again, err := r.Fetch(ctx, src, nil); err != nil || again != path || hits.Load() != 1 {
		t.Fatalf("second Fetch: %s, %v after %d downloads", again, err, hits.Load())
	}
	// A wrong checksum fails and leaves nothing in the cache.
	bad, _ := r.Resolve(srv.URL + "/other#sha256=" + strings.Repeat("00", 32))
	if _, err := r.Fetch(ctx, bad, nil); !errors.Is(err, backends.ErrFailed) || !strings.Contains(backends.SafeMessage(err), "checksum") {
		t.Fatalf("Fetch with a wrong checksum: %v", err)
	}
	entries, _ := os.ReadDir(r.Dir)
	if len(entries) != 1 {
		t.Fatalf("cache holds %d files after a failed download, want 1", len(entries))
	}
	missing, _ := r.Resolve(srv.URL + "/missing")
	if _, err := r.Fetch(ctx, missing, nil); !errors.Is(err, backends.ErrFailed) || !strings.Contains(backends.SafeMessage(err), "404") {
		t.Fatalf("Fetch of a missing image: %v", err)
	}
	srv.Close()
	gone, _ := r.Resolve(srv.URL + "/gone")
	if _, err := r.Fetch(ctx, gone, nil); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("Fetch from a closed server: %v", err)
	}
}
