// Package static embeds the dashboard's front-end files and serves them
// under content-hashed paths: app.css, app.js, console.css, console.js and
// rdp.js from this folder (the last three on the console page only), and
// the pinned htmx, xterm.js, noVNC and IronRDP files that `npm ci && npm
// run build` copies into dist/.
//
// A hashed path never changes meaning, so responses are cached for a year
// (immutable); a new build gets new paths.
//
// A folder directly under dist/ (dist/novnc/) is a tree: an ES module
// package whose files import each other by relative URL ("./util/browser.js",
// "../vendor/pako/..."). Hashing each file's name would break those imports,
// so a tree is hashed as a whole: one hash over every path and content in
// it, and each file is served at /static/<tree>.<hash>/<path inside the
// tree> (/static/novnc.3f2a1b9c0d4e/core/rfb.js). Relative imports then
// resolve inside the same hashed folder, any change to any file gives the
// whole tree a new prefix, and the long immutable caching stays correct.
// Path names a tree file by "<tree>/<path>" ("novnc/core/rfb.js").
//
// Each file is compressed with gzip and brotli once, at New (the best
// levels for the dashboard's small files, faster ones for the consoles'
// large ones: see brotliLevel), and the variant is chosen per request by
// Accept-Encoding. A file missing because npm did not run has no path:
// Path returns "" and the pages work without JavaScript.
package static

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/andybalholm/brotli"
)

//go:embed all:dist app.css app.js console.css console.js rdp.js
var files embed.FS

// Prefix is the URL path under which Handler serves the files.
const Prefix = "/static/"

// asset is one file with its precompressed variants.
type asset struct {
	url         string
	contentType string
	etag        string // quoted sha256 prefix of the content
	raw, gz, br []byte // gz or br is nil when compression does not pay
}

// Assets serves the embedded files. It is immutable after New and safe for
// concurrent use.
type Assets struct {
	byName map[string]*asset // "app.css", "htmx.min.js"
	byURL  map[string]*asset // "/static/app.3f2a1b9c.css"
}

// New hashes and compresses every embedded file.
func New() (*Assets, error) {
	a := &Assets{byName: map[string]*asset{}, byURL: map[string]*asset{}}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if dir, tree, ok := strings.Cut(p, "/"); ok && dir == "dist" && !strings.Contains(tree, "/") {
				if err := a.addTree(p, tree); err != nil {
					return err
				}
				return fs.SkipDir
			}
			return nil
		}
		name := path.Base(p)
		if strings.HasPrefix(name, ".") {
			return nil // dist/.gitkeep
		}
		data, err := files.ReadFile(p)
		if err != nil {
			return fmt.Errorf("static: %w", err)
		}
		ext := path.Ext(name)
		hash := contentHash(data)
		as, err := newAsset(name, Prefix+strings.TrimSuffix(name, ext)+"."+hash+ext, hash, data, false)
		if err != nil {
			return err
		}
		a.byName[name] = as
		a.byURL[as.url] = as
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// addTree adds every file under dir (dist/<tree>) under one prefix whose
// hash covers the names and contents of the whole tree (see the package
// doc). Hidden files are left out.
func (a *Assets) addTree(dir, tree string) error {
	type file struct {
		rel  string
		data []byte
	}
	var list []file
	h := sha256.New()
	err := fs.WalkDir(files, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		data, err := files.ReadFile(p)
		if err != nil {
			return fmt.Errorf("static: %w", err)
		}
		rel := strings.TrimPrefix(p, dir+"/")
		// WalkDir visits in lexical order, so the hash is deterministic.
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(data))
		h.Write(data)
		list = append(list, file{rel, data})
		return nil
	})
	if err != nil {
		return err
	}
	hash := hex.EncodeToString(h.Sum(nil))[:12]
	for _, f := range list {
		as, err := newAsset(f.rel, Prefix+tree+"."+hash+"/"+f.rel, contentHash(f.data), f.data, true)
		if err != nil {
			return err
		}
		a.byName[tree+"/"+f.rel] = as
		a.byURL[as.url] = as
	}
	return nil
}

func contentHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:12]
}

func newAsset(name, url, hash string, data []byte, inTree bool) (*asset, error) {
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	as := &asset{
		url:         url,
		contentType: ct,
		etag:        `"` + hash + `"`,
		raw:         data,
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzipLevel(len(data), inTree))
	if err != nil {
		return nil, fmt.Errorf("static: gzip %s: %w", name, err)
	}
	if _, err := zw.Write(data); err != nil {
		return nil, fmt.Errorf("static: gzip %s: %w", name, err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("static: gzip %s: %w", name, err)
	}
	var br bytes.Buffer
	bw := brotli.NewWriterLevel(&br, brotliLevel(len(data), inTree))
	if _, err := bw.Write(data); err != nil {
		return nil, fmt.Errorf("static: brotli %s: %w", name, err)
	}
	if err := bw.Close(); err != nil {
		return nil, fmt.Errorf("static: brotli %s: %w", name, err)
	}
	if gz.Len() < len(data) {
		as.gz = gz.Bytes()
	}
	if br.Len() < len(data) {
		as.br = br.Bytes()
	}
	return as, nil
}

// brotliLevel picks the brotli level of a file of n bytes. The best level
// costs about 5 µs a byte (measured on this project's machines): right for
// the dashboard's few small files, whose size is the page-weight budget,
// but seconds of start-up for the consoles' 1.3 MB (xterm.mjs alone takes
// 1.7 s to save 10%). Level 6 compresses those in tens of milliseconds.
// Past 1 MiB (IronRDP's RDP backend, 6 MB with its wasm inlined) even
// level 6 costs 0.6 s of every start; level 3 takes 0.17 s for a result
// 15% larger (2.1 MB instead of 1.85 MB), loaded once per RDP console.
func brotliLevel(n int, inTree bool) int {
	switch {
	case n <= 64<<10 && !inTree:
		return brotli.BestCompression
	case n > 1<<20:
		return 3
	}
	return 6
}

// gzipLevel follows brotliLevel: the best level where size matters most,
// the fastest for the largest files (gzip serves only clients without
// brotli).
func gzipLevel(n int, inTree bool) int {
	switch {
	case n <= 64<<10 && !inTree:
		return gzip.BestCompression
	case n > 1<<20:
		return gzip.BestSpeed
	}
	return gzip.DefaultCompression
}

// Path returns the hashed URL of the named file ("app.css",
// "htmx.min.js", "hx-sse.min.js", or a tree file such as
// "novnc/core/rfb.js"), or "" when it is not embedded.
func (a *Assets) Path(name string) string {
	if a == nil {
		return ""
	}
	if as, ok := a.byName[name]; ok {
		return as.url
	}
	return ""
}

// Handler serves the hashed paths. An unknown or stale hash is a 404: an
// old page asking for an old file must not get a new one cached as old.
func (a *Assets) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		as, ok := a.byURL[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		body, enc := as.raw, ""
		switch {
		case as.br != nil && accepts(r, "br"):
			body, enc = as.br, "br"
		case as.gz != nil && accepts(r, "gzip"):
			body, enc = as.gz, "gzip"
		}
		h := w.Header()
		h.Set("Content-Type", as.contentType)
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
		h.Add("Vary", "Accept-Encoding")
		h.Set("X-Content-Type-Options", "nosniff")
		etag := as.etag
		if enc != "" {
			h.Set("Content-Encoding", enc)
			etag = strings.TrimSuffix(etag, `"`) + "-" + enc + `"`
		}
		h.Set("ETag", etag)
		if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Length", fmt.Sprint(len(body)))
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(body)
	})
}

// accepts reports whether the request's Accept-Encoding lists coding with
// a non-zero quality.
func accepts(r *http.Request, coding string) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), coding) {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}
