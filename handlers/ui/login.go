package ui

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/views"
)

// Pre-login session keys: what the callback checks against.
const (
	sessState    = "login.state"
	sessNonce    = "login.nonce"
	sessVerifier = "login.verifier"
	sessNext     = "login.next"
)

// loginShow is GET /login: the sign-in page, or where the caller was
// going when they are signed in already.
func (s *server) loginShow(w http.ResponseWriter, r *http.Request) error {
	next := localPath(r.URL.Query().Get("next"))
	if id := middleware.IdentityFrom(r.Context()); !id.Anonymous() && r.URL.Query().Get("next") != "" {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return nil
	}
	l := views.Login{Page: s.page(r.Context(), r, "Sign in", ""), Enabled: s.OIDC != nil, Next: next}
	l.Page.Activity = nil
	if s.OIDC != nil {
		l.Issuer = s.OIDC.Issuer()
	}
	if r.URL.Query().Get("next") != "" {
		l.Message = "Sign in to continue."
	}
	return renderPage(w, r, http.StatusOK, views.LoginPage(l), "")
}

// loginStart is POST /login: it starts the authorization code flow with
// PKCE, keeping state, nonce and verifier in the session, and sends the
// browser to the provider.
func (s *server) loginStart(w http.ResponseWriter, r *http.Request) error {
	if s.OIDC == nil || s.Sessions == nil {
		return backends.NotFoundf("this server has no sign-in provider: identity comes from Tailscale")
	}
	_ = r.ParseForm()
	l, err := s.OIDC.Start(r.Context(), s.redirectURL(r))
	if err != nil {
		return err
	}
	ctx := r.Context()
	s.Sessions.Put(ctx, sessState, l.State)
	s.Sessions.Put(ctx, sessNonce, l.Nonce)
	s.Sessions.Put(ctx, sessVerifier, l.Verifier)
	s.Sessions.Put(ctx, sessNext, localPath(r.PostForm.Get("next")))
	http.Redirect(w, r, l.URL, http.StatusSeeOther)
	return nil
}

// loginCallback is GET /login/callback, where the provider returns the
// browser: the state must be the session's, the code is exchanged with
// the verifier, the ID token's nonce must be the session's. The session
// token is renewed at sign-in (no fixation). Success and failure are
// audited.
func (s *server) loginCallback(w http.ResponseWriter, r *http.Request) error {
	if s.OIDC == nil || s.Sessions == nil {
		return backends.NotFoundf("this server has no sign-in provider")
	}
	ctx := r.Context()
	q := r.URL.Query()
	state := s.Sessions.PopString(ctx, sessState)
	nonce := s.Sessions.PopString(ctx, sessNonce)
	verifier := s.Sessions.PopString(ctx, sessVerifier)
	next := localPath(s.Sessions.PopString(ctx, sessNext))
	fail := func(msg string) error {
		s.Audit.Record(ctx, middleware.IdentityFrom(ctx), "dashboard", "login", s.OIDC.Issuer(), auth.OutcomeRefused, msg)
		return &auth.Refusal{Kind: auth.ErrUnauthenticated, Msg: msg}
	}
	switch {
	case state == "" || verifier == "":
		return fail("sign-in failed: this sign-in was not started here or has expired; sign in again")
	case subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1:
		return fail("sign-in failed: the state does not match this sign-in")
	case q.Get("error") != "":
		return fail("sign-in failed: the provider answered " + safeWord(q.Get("error")))
	case q.Get("code") == "":
		return fail("sign-in failed: the provider sent no code")
	}
	id, err := s.OIDC.Finish(ctx, s.redirectURL(r), q.Get("code"), verifier, nonce)
	if err != nil {
		var refused *auth.Refusal
		if errors.As(err, &refused) {
			return fail(refused.Msg)
		}
		s.Audit.Record(ctx, middleware.IdentityFrom(ctx), "dashboard", "login", s.OIDC.Issuer(), auth.OutcomeError, "the sign-in provider could not be reached")
		return err
	}
	if err := s.Sessions.RenewToken(ctx); err != nil {
		return err
	}
	s.Sessions.Put(ctx, auth.SessionLogin, id.Login)
	s.Sessions.Put(ctx, auth.SessionName, id.Name)
	s.Audit.Record(ctx, id, "dashboard", "login", s.OIDC.Issuer(), auth.OutcomeOK, "signed in with OIDC")
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// logout is POST /logout: the session is destroyed (its row deleted and
// the cookie cleared) and audited.
func (s *server) logout(w http.ResponseWriter, r *http.Request) error {
	id := middleware.IdentityFrom(r.Context())
	if s.Sessions != nil {
		if err := s.Sessions.Destroy(r.Context()); err != nil {
			return err
		}
	}
	if id.Via == auth.ViaOIDC {
		s.Audit.Record(r.Context(), id, "dashboard", "logout", "session", auth.OutcomeOK, "signed out")
	}
	to := "/"
	if s.OIDC != nil {
		to = "/login"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}

// redirectURL is the configured OIDC redirect URL, or this server's
// /login/callback as the request reached it.
func (s *server) redirectURL(r *http.Request) string {
	if u := s.OIDC.RedirectURL(); u != "" {
		return u
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/login/callback"
}

// user is the caller as the page frame shows it.
func (s *server) user(r *http.Request) views.User {
	id := middleware.IdentityFrom(r.Context())
	return views.User{
		Display:  id.Display(),
		Via:      string(id.Via),
		Admin:    id.Admin,
		OpenMode: s.Policy.OpenMode(),
		SignIn:   s.OIDC != nil && id.Anonymous(),
		SignOut:  s.Sessions != nil && id.Via == auth.ViaOIDC,
	}
}

// localPath returns the path and query of s when it is a path on this
// server, else "/": a sign-in never sends the browser to another site.
func localPath(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Path == "" || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") || strings.Contains(u.Path, "\\") {
		return "/"
	}
	out := u.EscapedPath()
	if u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	if strings.HasPrefix(out, "/login") {
		return "/"
	}
	return out
}

// safeWord keeps an OAuth error code (letters and underscores) and drops
// anything else a crafted callback might carry.
func safeWord(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
			return r
		}
		return -1
	}, s)
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}
