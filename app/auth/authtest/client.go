package authtest

import (
	"slices"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// client is the provider's one confidential web client.
type client struct {
	id, secret string
	redirects  []string
}

var _ op.Client = (*client)(nil)

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return c.redirects }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType         { return []oidc.GrantType{oidc.GrantTypeCode} }
func (c *client) LoginURL(id string) string            { return "/login?authRequestID=" + id }
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration       { return 5 * time.Minute }
func (c *client) DevMode() bool                        { return true } // http redirect URIs on loopback
func (c *client) IsScopeAllowed(string) bool           { return false }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true } // email and name in the ID token
func (c *client) ClockSkew() time.Duration             { return 0 }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// authRequest is one authorization request, done once a user signed in.
type authRequest struct {
	id        string
	req       oidc.AuthRequest
	challenge *oidc.CodeChallenge
	subject   string
	done      bool
	authTime  time.Time
}

var _ op.AuthRequest = (*authRequest)(nil)

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return []string{a.req.ClientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.req.ClientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetNonce() string                      { return a.req.Nonce }
func (a *authRequest) GetRedirectURI() string                { return a.req.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.req.ResponseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.req.ResponseMode }
func (a *authRequest) GetScopes() []string                   { return slices.Clone(a.req.Scopes) }
func (a *authRequest) GetState() string                      { return a.req.State }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }
