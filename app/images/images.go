// Package images resolves what a caller names as a VM's source image into
// a file on this host: a catalog entry, an http(s) URL (downloaded with
// progress into the task that creates the VM, and checked against a
// SHA-256 when one is known), or a local path. Downloads are cached by URL
// under the data directory, so a second VM from the same image costs
// nothing.
package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/corral-dev/corral/backends"
)

// Entry is one image of the catalog.
type Entry struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	URL         string `json:"url"`
	Format      string `json:"format"`           // qcow2 or raw
	SHA256      string `json:"sha256,omitempty"` // checked after download when set
	DefaultUser string `json:"defaultUser"`
}

// Catalog is the built-in list of cloud images (qcow2 with cloud-init).
// URLs name the distribution's own download site; Corral mirrors nothing,
// so a user can check what they download. Only links that stay valid from
// release to release belong here: these machines cannot check a URL.
var Catalog = []Entry{
	{Name: "ubuntu", Description: "Ubuntu 24.04 LTS cloud image (current build)", URL: "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img", Format: "qcow2", DefaultUser: "ubuntu"},
}

// Source is a resolved image: a local path, or a URL still to fetch.
type Source struct {
	Path   string // set for a local file (or once fetched)
	URL    string // set when the image must be downloaded
	SHA256 string
	Entry  *Entry // the catalog entry, when named by one
}

// Remote reports whether the source must be downloaded first.
func (s Source) Remote() bool { return s.Path == "" && s.URL != "" }

// Resolver turns image names into sources and fetches remote ones.
type Resolver struct {
	// Catalog lists the entries accepted by name; nil means Catalog.
	Catalog []Entry
	// Dir caches downloads.
	Dir string
	// Client downloads; nil means a client with a 30 min timeout.
	Client *http.Client
}

// Resolve checks what the caller named, without fetching anything: a
// catalog name, an http(s) URL (optionally with "#sha256=HEX"), or an
// existing local file. Anything else is an Invalid error that names the
// accepted forms.
func (r *Resolver) Resolve(image string) (Source, error) {
	cat := r.Catalog
	if cat == nil {
		cat = Catalog
	}
	if i := slices.IndexFunc(cat, func(e Entry) bool { return e.Name == image }); i >= 0 {
		e := cat[i]
		return Source{URL: e.URL, SHA256: e.SHA256, Entry: &e}, nil
	}
	if strings.HasPrefix(image, "http://") || strings.HasPrefix(image, "https://") {
		u, err := url.Parse(image)
		if err != nil || u.Host == "" {
			return Source{}, backends.Invalidf("image URL %q does not parse", image)
		}
		sum := ""
		if frag, ok := strings.CutPrefix(u.Fragment, "sha256="); ok {
			if b, err := hex.DecodeString(frag); err != nil || len(b) != sha256.Size {
				return Source{}, backends.Invalidf("image URL %q: the #sha256= fragment must be 64 hex digits", image)
			}
			sum = strings.ToLower(frag)
		}
		u.Fragment = ""
		return Source{URL: u.String(), SHA256: sum}, nil
	}
	names := make([]string, 0, len(cat))
	for _, e := range cat {
		names = append(names, e.Name)
	}
	accepted := fmt.Sprintf("accepted are a catalog name (%s), an http(s) URL of a qcow2 or raw image, or the path of one on this host", strings.Join(names, ", "))
	if !filepath.IsAbs(image) {
		return Source{}, backends.Invalidf("unknown image %q: %s", image, accepted)
	}
	fi, err := os.Stat(image)
	if err != nil || !fi.Mode().IsRegular() {
		return Source{}, backends.Invalidf("image %q does not exist on this host: %s", image, accepted)
	}
	return Source{Path: image}, nil
}

// Progress receives download progress; total is -1 when unknown.
type Progress func(done, total int64)

// Fetch downloads a remote source into the cache (once per URL) and
// returns its path. A checksum mismatch deletes the download and is a
// Failed error; a server that cannot be reached is Unavailable.
func (r *Resolver) Fetch(ctx context.Context, s Source, progress Progress) (string, error) {
	if !s.Remote() {
		return s.Path, nil
	}
	if err := os.MkdirAll(r.Dir, 0o700); err != nil {
		return "", fmt.Errorf("images: cache: %w", err)
	}
	key := sha256.Sum256([]byte(s.URL))
	dst := filepath.Join(r.Dir, hex.EncodeToString(key[:12])+".img")
	if _, err := os.Stat(dst); err == nil {
		if s.SHA256 == "" || checkSum(dst, s.SHA256) == nil {
			return dst, nil
		}
	}
	host := hostOf(s.URL)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return "", backends.Invalidf("image URL does not parse")
	}
	c := r.Client
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Minute}
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", &backends.Error{Kind: backends.ErrUnavailable, Msg: "the image server " + host + " could not be reached", Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", backends.Failed(fmt.Sprintf("the image server %s answered %s", host, resp.Status), nil)
	}
	tmp, err := os.CreateTemp(r.Dir, "download-*")
	if err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	pw := &progressWriter{total: resp.ContentLength, fn: progress}
	if _, err := io.Copy(io.MultiWriter(tmp, h, pw), resp.Body); err != nil {
		tmp.Close()
		return "", backends.Failed("the download from "+host+" broke off", err)
	}
	if progress != nil && pw.last != pw.done {
		progress(pw.done, pw.total) // the end, when the size was unknown
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); s.SHA256 != "" && got != s.SHA256 {
		return "", backends.Failed(fmt.Sprintf("the image from %s does not match its checksum (sha256 %s, expected %s)", host, got, s.SHA256), nil)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	return dst, nil
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Host
	}
	return "the image server"
}

func checkSum(path, want string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if hex.EncodeToString(h.Sum(nil)) != want {
		return errors.New("images: checksum mismatch")
	}
	return nil
}

// progressWriter reports progress at most every 1% (or every 8 MiB when
// the size is unknown), so a task log is not flooded.
type progressWriter struct {
	done, total, last int64
	fn                Progress
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	step := int64(8 << 20)
	if p.total > 0 {
		step = max(p.total/100, 1)
	}
	if p.fn != nil && (p.done-p.last >= step || p.done == p.total) {
		p.last = p.done
		p.fn(p.done, p.total)
	}
	return len(b), nil
}
