// Package authtest serves, for tests, what Corral's identity sources talk
// to: a real OpenID provider (github.com/zitadel/oidc/v3's certified
// pkg/op, with an in-memory storage and a password login page written
// here) and a Tailscale LocalAPI on a unix socket answering WhoIs.
package authtest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is an account of the test provider.
type User struct {
	ID, Email, Password, Name string
	// EmailVerified is sent as email_verified.
	EmailVerified bool
}

// Provider is a running OpenID provider. Issuer is its URL; ClientID and
// ClientSecret are the one client it knows, whose redirect URIs are
// added with AllowRedirect.
type Provider struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	st           *storage
}

// NewProvider starts a provider on a loopback port for the test's
// lifetime, with the given accounts.
func NewProvider(t testing.TB, users ...User) *Provider {
	t.Helper()
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	st := &storage{
		key:      key,
		keyID:    randomID(),
		client:   &client{id: "corral", secret: randomID()},
		users:    map[string]User{},
		requests: map[string]*authRequest{},
		codes:    map[string]string{},
		tokens:   map[string]token{},
	}
	for _, u := range users {
		st.users[u.ID] = u
	}
	cfg := &op.Config{CodeMethodS256: true, AuthMethodPost: true}
	_, _ = rand.Read(cfg.CryptoKey[:])
	provider, err := op.NewProvider(cfg, st, op.StaticIssuer(srv.URL), op.WithAllowInsecure())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/login", st.login(srv.URL+"/authorize/callback?id="))
	mux.Handle("/", provider)
	handler = mux
	return &Provider{Issuer: srv.URL, ClientID: st.client.id, ClientSecret: st.client.secret, st: st}
}

// AllowRedirect registers a redirect URI of the client.
func (p *Provider) AllowRedirect(uri string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.client.redirects = append(p.st.client.redirects, uri)
}

var loginPage = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Test provider sign-in</title></head>
<body><h1>Test OpenID provider</h1>
{{if .Error}}<p data-testid="op-error">{{.Error}}</p>{{end}}
<form method="post" action="/login" data-testid="op-login">
<input type="hidden" name="id" value="{{.ID}}">
<label>User <input name="username" data-testid="op-username"></label>
<label>Password <input name="password" type="password" data-testid="op-password"></label>
<button type="submit" data-testid="op-submit">Sign in</button>
</form></body></html>`))

// login is the provider's password page: GET shows the form for an
// authorization request, POST checks the password, marks the request
// done for that user and returns to the provider's callback.
func (s *storage) login(callback string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		id := r.Form.Get("authRequestID")
		if r.Method == http.MethodGet {
			_ = loginPage.Execute(w, map[string]string{"ID": id})
			return
		}
		id = r.PostForm.Get("id")
		s.mu.Lock()
		req, ok := s.requests[id]
		var user User
		for _, u := range s.users {
			if u.Email == r.PostForm.Get("username") && u.Password == r.PostForm.Get("password") {
				user = u
			}
		}
		if ok && user.ID != "" {
			req.subject, req.done, req.authTime = user.ID, true, time.Now()
		}
		s.mu.Unlock()
		if !ok {
			http.Error(w, "unknown authorization request", http.StatusBadRequest)
			return
		}
		if user.ID == "" {
			w.WriteHeader(http.StatusUnauthorized)
			_ = loginPage.Execute(w, map[string]string{"ID": id, "Error": "wrong user or password"})
			return
		}
		http.Redirect(w, r, callback+url.QueryEscape(id), http.StatusFound)
	}
}

// storage is the provider's state, in memory: one client, the users,
// authorization requests, codes and access tokens.
type storage struct {
	key    *rsa.PrivateKey
	keyID  string
	client *client

	mu       sync.Mutex
	users    map[string]User
	requests map[string]*authRequest
	codes    map[string]string // code -> request id
	tokens   map[string]token
}

type token struct {
	subject string
	expiry  time.Time
}

var _ op.Storage = (*storage)(nil)

var errNotFound = errors.New("authtest: not found")

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *storage) CreateAuthRequest(_ context.Context, r *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &authRequest{id: randomID(), req: *r}
	if r.CodeChallenge != "" {
		a.challenge = &oidc.CodeChallenge{Challenge: r.CodeChallenge, Method: r.CodeChallengeMethod}
	}
	s.requests[a.id] = a
	return a, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.requests[id]; ok {
		return a, nil
	}
	return nil, errNotFound
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errNotFound
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

// DeleteAuthRequest is called once a code was exchanged: the code cannot
// be used twice.
func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for c, rid := range s.codes {
		if rid == id {
			delete(s.codes, c)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, r op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, exp := randomID(), time.Now().Add(5*time.Minute)
	s.tokens[id] = token{subject: r.GetSubject(), expiry: exp}
	return id, exp, nil
}

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errors.New("authtest: refresh tokens are not offered")
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *storage) TerminateSession(context.Context, string, string) error { return nil }

func (s *storage) RevokeToken(_ context.Context, tok, _, _ string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, tok)
	return nil
}

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	return signingKey{id: s.keyID, key: s.key}, nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{signingKey{id: s.keyID, key: s.key}}}, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	if id != s.client.id {
		return nil, errNotFound
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *s.client
	c.redirects = slices.Clone(s.client.redirects)
	return &c, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if id != s.client.id || secret != s.client.secret {
		return errors.New("authtest: wrong client credentials")
	}
	return nil
}

// SetUserinfoFromScopes fills the standard claims the scopes ask for.
func (s *storage) SetUserinfoFromScopes(_ context.Context, info *oidc.UserInfo, userID, _ string, scopes []string) error {
	s.mu.Lock()
	u, ok := s.users[userID]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("authtest: no user %q", userID)
	}
	info.Subject = u.ID
	for _, sc := range scopes {
		switch sc {
		case oidc.ScopeEmail:
			info.Email, info.EmailVerified = u.Email, oidc.Bool(u.EmailVerified)
		case oidc.ScopeProfile:
			info.Name, info.PreferredUsername = u.Name, u.Email
		}
	}
	return nil
}

func (s *storage) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, tokenID, subject, _ string) error {
	s.mu.Lock()
	t, ok := s.tokens[tokenID]
	s.mu.Unlock()
	if !ok || time.Now().After(t.expiry) {
		return errors.New("authtest: token is not valid")
	}
	return s.SetUserinfoFromScopes(ctx, info, t.subject, "", []string{oidc.ScopeEmail, oidc.ScopeProfile})
}

func (s *storage) SetIntrospectionFromToken(_ context.Context, r *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tokens[tokenID]; ok {
		r.Active, r.Subject, r.ClientID = true, subject, clientID
	}
	return nil
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errNotFound
}

func (s *storage) ValidateJWTProfileScopes(_ context.Context, _ string, scopes []string) ([]string, error) {
	return scopes, nil
}

func (s *storage) Health(context.Context) error { return nil }

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return k.id }

type publicKey struct{ signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }
