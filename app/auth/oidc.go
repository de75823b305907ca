package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/corral-dev/corral/backends"
)

// OIDC is sign-in with an OpenID provider: the authorization code flow
// with PKCE, a state and a nonce. The provider is discovered on first use
// and the discovery is kept, so a provider that is down at start does not
// stop the server.
type OIDC struct {
	cfg    OIDCConfig
	client *http.Client
	log    *slog.Logger

	mu       sync.Mutex
	provider *oidc.Provider
}

// NewOIDC returns the sign-in of cfg. client is used to reach the
// provider (nil: http.DefaultClient).
func NewOIDC(cfg OIDCConfig, client *http.Client, log *slog.Logger) *OIDC {
	if client == nil {
		client = http.DefaultClient
	}
	if log == nil {
		log = slog.Default()
	}
	if cfg.LoginClaim == "" {
		cfg.LoginClaim = "email"
	}
	return &OIDC{cfg: cfg, client: client, log: log}
}

// Issuer returns the provider's issuer URL.
func (o *OIDC) Issuer() string { return o.cfg.Issuer }

// RedirectURL returns the configured redirect URL, or "" when it is to be
// derived from the request.
func (o *OIDC) RedirectURL() string { return o.cfg.RedirectURL }

func (o *OIDC) discover(ctx context.Context) (*oidc.Provider, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider != nil {
		return o.provider, nil
	}
	// The provider keeps this context to fetch its signing keys later:
	// it must outlive the request that happened to discover it.
	pctx := oidc.ClientContext(context.WithoutCancel(ctx), o.client)
	p, err := oidc.NewProvider(pctx, o.cfg.Issuer)
	if err != nil {
		o.log.Error("auth: OIDC discovery failed", "issuer", o.cfg.Issuer, "err", err)
		return nil, backends.Unavailable("the sign-in provider", err)
	}
	o.provider = p
	return p, nil
}

func (o *OIDC) oauth2(p *oidc.Provider, redirectURL string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     o.cfg.ClientID,
		ClientSecret: o.cfg.ClientSecret,
		RedirectURL:  redirectURL,
		Endpoint:     p.Endpoint(),
		Scopes:       []string{oidc.ScopeOpenID, "profile", "email"},
	}
}

// Login is a started sign-in: the browser goes to URL; State, Nonce and
// Verifier stay in the (pre-login) session until the callback.
type Login struct {
	URL, State, Nonce, Verifier string
}

// Start begins a sign-in that returns to redirectURL.
func (o *OIDC) Start(ctx context.Context, redirectURL string) (Login, error) {
	p, err := o.discover(ctx)
	if err != nil {
		return Login{}, err
	}
	l := Login{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier()}
	l.URL = o.oauth2(p, redirectURL).AuthCodeURL(l.State, oidc.Nonce(l.Nonce), oauth2.S256ChallengeOption(l.Verifier))
	return l, nil
}

// Finish exchanges the code of the callback for tokens, verifies the ID
// token (signature, issuer, audience, expiry) and its nonce, and returns
// the identity it names (Admin not yet set). Errors are safe to show.
func (o *OIDC) Finish(ctx context.Context, redirectURL, code, verifier, nonce string) (Identity, error) {
	p, err := o.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	ctx = oidc.ClientContext(ctx, o.client)
	tok, err := o.oauth2(p, redirectURL).Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return Identity{}, o.refuse("the sign-in provider did not accept the code", err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return Identity{}, o.refuse("the sign-in provider sent no ID token", nil)
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: o.cfg.ClientID}).Verify(ctx, raw)
	if err != nil {
		return Identity{}, o.refuse("the ID token does not verify", err)
	}
	if nonce == "" || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return Identity{}, o.refuse("the ID token's nonce does not match this sign-in", nil)
	}
	var c struct {
		Email             string `json:"email"`
		EmailVerified     *bool  `json:"email_verified"`
		PreferredUsername string `json:"preferred_username"`
		Name              string `json:"name"`
	}
	if err := idt.Claims(&c); err != nil {
		return Identity{}, o.refuse("the ID token's claims do not decode", err)
	}
	var login string
	switch o.cfg.LoginClaim {
	case "email":
		if c.EmailVerified == nil || !*c.EmailVerified {
			return Identity{}, o.refuse("the provider did not verify your email address, which is your login here", nil)
		}
		login = c.Email
	case "preferred_username":
		login = c.PreferredUsername
	case "sub":
		login = idt.Subject
	}
	if login == "" {
		return Identity{}, o.refuse(fmt.Sprintf("the ID token has no %s claim, which is the login here", o.cfg.LoginClaim), nil)
	}
	return Identity{Login: login, Name: c.Name, Via: ViaOIDC}, nil
}

func (o *OIDC) refuse(msg string, cause error) error {
	if cause != nil {
		o.log.Warn("auth: sign-in refused", "reason", msg, "err", cause)
	}
	return &Refusal{Kind: ErrUnauthenticated, Msg: "sign-in failed: " + msg}
}

func randomString() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
