package console

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// Tokens of the RDP proxy.
const (
	// tokenTTL is how long an RDP token can wait for its WebSocket: the
	// page asks for one when the user presses Connect, and the web client
	// opens the socket at once.
	tokenTTL = 60 * time.Second
	// maxTokens bounds the outstanding tokens, so a caller who asks in a
	// loop cannot grow the table without end.
	maxTokens = 4096
)

// rdpGrant is what an RDP token stands for: one connection to ref's RDP
// console by actor, before expires.
type rdpGrant struct {
	ref     backends.InstanceRef
	actor   string
	label   string // the destination the page gives the web client
	expires time.Time
}

// rdpTokens are the outstanding RDP tokens. A token is random (256 bits),
// single use (taken out on first presentation, whatever happens next) and
// short-lived; it lives only in this process's memory, so a restart
// voids every token, which costs a click.
type rdpTokens struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]rdpGrant
}

func newRDPTokens(now func() time.Time) *rdpTokens {
	return &rdpTokens{now: now, m: map[string]rdpGrant{}}
}

// issue returns a new token for g.
func (t *rdpTokens) issue(g rdpGrant) (string, error) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract)
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for k, v := range t.m {
		if !now.Before(v.expires) {
			delete(t.m, k)
		}
	}
	if len(t.m) >= maxTokens {
		return "", &backends.Error{Kind: backends.ErrUnavailable, Msg: "too many RDP connections are waiting to open: try again in a minute"}
	}
	g.expires = now.Add(tokenTTL)
	t.m[tok] = g
	return tok, nil
}

// take removes tok and returns its grant; ok is false for an unknown,
// used or expired token.
func (t *rdpTokens) take(tok string) (rdpGrant, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g, ok := t.m[tok]
	delete(t.m, tok)
	if !ok || !t.now().Before(g.expires) {
		return rdpGrant{}, false
	}
	return g, true
}

// rdpTokenAnswer is the JSON body of POST /rdp-token/{ref}.
type rdpTokenAnswer struct {
	Token       string `json:"token"`
	Socket      string `json:"socket"`      // the proxy's path, /ws/rdp/{ref}
	Destination string `json:"destination"` // what the web client names as its destination
	ExpiresIn   int    `json:"expiresIn"`   // seconds
}

// rdpToken is POST /rdp-token/{ref}: a token for one RDP connection to
// ref by the caller. Only callers the console surface lets in get here
// (Deps.Authorize, as for every console), only from this site's pages,
// and only for an instance whose backend offers RDP now.
func (s *server) rdpToken(w http.ResponseWriter, r *http.Request) error {
	if err := s.csrf.Check(r); err != nil {
		return backends.Forbiddenf("RDP tokens are issued to this site's own pages only")
	}
	t, err := s.resolve(r, "/rdp-token/")
	if err != nil {
		return err
	}
	cctx, cancel := s.Fleet.CallContext(r.Context())
	offered, err := t.dialer.Consoles(cctx, t.ref)
	cancel()
	if err != nil {
		return err
	}
	if !slices.Contains(offered, backends.ConsoleRDP) {
		return backends.Conflictf("%s offers no RDP console now: start it, or start the RDP service in its guest", t.ref.Name)
	}
	// A backend that lists RDP from its configuration alone (qemu's port
	// forward) is asked here whether the guest answers, where the answer
	// matters: the page then explains at once, instead of a connection
	// that waits on a forward nobody serves.
	if p, ok := t.dialer.(backends.RDPProber); ok {
		cctx, cancel := s.Fleet.CallContext(r.Context())
		err := p.ProbeRDP(cctx, t.ref)
		cancel()
		if err != nil && !errors.Is(err, backends.ErrUnavailable) {
			return err // stopped meanwhile, gone, refused: its own words
		}
		if err != nil {
			return &backends.Error{Kind: backends.ErrUnavailable, Msg: t.ref.Name + "'s RDP console does not answer (" + backends.ProbeReason(err) + "): start the RDP service in its guest, or open its VNC or serial console", Err: err}
		}
	}
	label := rdpLabel(t.ref)
	tok, err := s.tokens.issue(rdpGrant{ref: t.ref, actor: middleware.IdentityFrom(r.Context()).Actor(), label: label})
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	return json.NewEncoder(w).Encode(rdpTokenAnswer{Token: tok, Socket: wsURL(backends.ConsoleRDP, t.ref), Destination: label, ExpiresIn: int(tokenTTL / time.Second)})
}

// rdpLabel is the destination the web client is told to name: the
// instance and RDP's port. The proxy never dials it (the token's target
// is dialed through the backend); IronRDP uses its host part as the
// server's name.
func rdpLabel(ref backends.InstanceRef) string { return ref.Name + ":3389" }
