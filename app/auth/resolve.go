package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"tailscale.com/client/local"
	"tailscale.com/client/tailscale/apitype"
)

// Session keys of a signed-in OIDC session.
const (
	SessionLogin = "auth.login"
	SessionName  = "auth.name"
)

// The identity headers `tailscale serve` sets on the requests it proxies.
const (
	HeaderTailscaleLogin = "Tailscale-User-Login"
	HeaderTailscaleName  = "Tailscale-User-Name"
	headerTailscalePic   = "Tailscale-User-Profile-Pic"
)

// SessionReader is the slice of the session manager the resolver reads.
type SessionReader interface {
	GetString(ctx context.Context, key string) string
}

// WhoIser asks tailscaled who is behind a remote address
// (*local.Client does).
type WhoIser interface {
	WhoIs(ctx context.Context, remoteAddr string) (*apitype.WhoIsResponse, error)
}

// Tailscale's address ranges: only connections from them are worth a
// WhoIs.
var tailnetRanges = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("fd7a:115c:a1e0::/48"),
}

// Resolver finds the identity of a request. It reads the connection's
// remote address, the Authorization header, the session and, from trusted
// proxies only, the Tailscale identity headers: never a body or a query.
type Resolver struct {
	policy    *Policy
	proxies   []netip.Prefix
	peerToken []byte
	whois     WhoIser
	sessions  SessionReader
	log       *slog.Logger
}

// ResolverOptions are the parts of a Resolver that are not configuration.
type ResolverOptions struct {
	Sessions SessionReader // nil: no OIDC sessions
	// WhoIs overrides the tailscaled client built from Config.Tailscale.
	WhoIs WhoIser
	Log   *slog.Logger
}

// NewResolver returns a resolver for cfg under policy.
func NewResolver(cfg Config, policy *Policy, opts ResolverOptions) *Resolver {
	r := &Resolver{policy: policy, proxies: cfg.TrustedProxies, whois: opts.WhoIs, sessions: opts.Sessions, log: opts.Log}
	if cfg.PeerToken != "" {
		r.peerToken = []byte(cfg.PeerToken)
	}
	if r.whois == nil && cfg.Tailscale != "" {
		lc := &local.Client{UseSocketOnly: true}
		if cfg.Tailscale != "default" {
			lc.Socket = cfg.Tailscale
		}
		r.whois = lc
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r
}

// Policy returns the policy the resolver completes identities with.
func (r *Resolver) Policy() *Policy { return r.policy }

// Resolve returns the caller of req, with Admin set by the policy. The
// Tailscale headers of a request that did not come from a trusted proxy
// are removed from req, so nothing after this can believe them.
func (r *Resolver) Resolve(req *http.Request) Identity {
	return r.policy.Complete(r.resolve(req))
}

func (r *Resolver) resolve(req *http.Request) Identity {
	if h := req.Header.Get("Authorization"); h != "" {
		return r.bearer(h)
	}
	if r.sessions != nil {
		if login := r.sessions.GetString(req.Context(), SessionLogin); login != "" {
			return Identity{Login: login, Name: r.sessions.GetString(req.Context(), SessionName), Via: ViaOIDC}
		}
	}
	remote := remoteAddr(req)
	if login := req.Header.Get(HeaderTailscaleLogin); login != "" {
		if r.trusted(remote.Addr()) {
			return Identity{Login: login, Name: decodeHeader(req.Header.Get(HeaderTailscaleName)), Via: ViaTailscale}
		}
		r.log.Warn("auth: Tailscale identity headers from an untrusted address ignored", "remote", remote.Addr().String(), "login", login)
	}
	req.Header.Del(HeaderTailscaleLogin)
	req.Header.Del(HeaderTailscaleName)
	req.Header.Del(headerTailscalePic)
	if r.whois != nil && remote.IsValid() && inTailnet(remote.Addr()) {
		if id, ok := r.tailscalePeer(req.Context(), remote); ok {
			return id
		}
	}
	return Identity{Via: ViaAnonymous}
}

// bearer checks an Authorization header against the peer token, in
// constant time. A header that does not verify is not ignored: the
// request is refused, so a caller with a typo learns it at once.
func (r *Resolver) bearer(h string) Identity {
	scheme, tok, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return Identity{Via: ViaAnonymous, Rejected: "the Authorization header is not accepted: send Bearer <peer token>"}
	}
	if r.peerToken == nil || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), r.peerToken) != 1 {
		return Identity{Via: ViaAnonymous, Rejected: "the bearer token is not valid"}
	}
	return Identity{Via: ViaPeer, Name: "Corral peer"}
}

func (r *Resolver) trusted(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range r.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// tailscalePeer asks tailscaled who the connection's peer is. A tagged
// node is named by its first tag (e.g. "tag:ci"), which the allowlist can
// name too.
func (r *Resolver) tailscalePeer(ctx context.Context, remote netip.AddrPort) (Identity, bool) {
	res, err := r.whois.WhoIs(ctx, remote.String())
	if err != nil {
		if !errors.Is(err, local.ErrPeerNotFound) {
			r.log.Warn("auth: tailscaled WhoIs failed", "remote", remote.String(), "err", err)
		}
		return Identity{}, false
	}
	if res == nil || res.UserProfile == nil {
		return Identity{}, false
	}
	if res.Node != nil && len(res.Node.Tags) > 0 {
		return Identity{Login: res.Node.Tags[0], Name: strings.TrimSuffix(res.Node.Name, "."), Via: ViaTailscale}, true
	}
	if res.UserProfile.LoginName == "" {
		return Identity{}, false
	}
	return Identity{Login: res.UserProfile.LoginName, Name: res.UserProfile.DisplayName, Via: ViaTailscale}, true
}

func remoteAddr(req *http.Request) netip.AddrPort {
	ap, err := netip.ParseAddrPort(req.RemoteAddr)
	if err != nil {
		host, _, _ := net.SplitHostPort(req.RemoteAddr)
		a, err := netip.ParseAddr(host)
		if err != nil {
			return netip.AddrPort{}
		}
		return netip.AddrPortFrom(a.Unmap(), 0)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

func inTailnet(a netip.Addr) bool {
	for _, p := range tailnetRanges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// decodeHeader decodes an RFC 2047 word, as tailscale serve sends a
// display name that is not ASCII.
func decodeHeader(s string) string {
	d, err := new(mime.WordDecoder).DecodeHeader(s)
	if err != nil {
		return s
	}
	return d
}
