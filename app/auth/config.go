package auth

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Config is the identity and access configuration of `corral serve`.
type Config struct {
	// Admins is the CORRAL_ADMINS allowlist; empty means open mode.
	Admins []string
	// Required refuses every anonymous request (CORRAL_AUTH_REQUIRED=1).
	Required bool
	// TrustedProxies are the addresses whose Tailscale-User-* headers are
	// believed (CORRAL_TRUSTED_PROXIES, CIDRs or single addresses).
	TrustedProxies []netip.Prefix
	// PeerToken is the bearer token of Corral peers (CORRAL_PEER_TOKEN).
	PeerToken string
	// Tailscale is the tailscaled socket asked for WhoIs: "" asks nobody,
	// "default" the platform's socket (CORRAL_TAILSCALE=1 or a path).
	Tailscale string
	OIDC      OIDCConfig
	// SessionLifetime bounds a signed-in session; SessionIdle ends one
	// unused that long. Defaults 12h and 2h.
	SessionLifetime time.Duration
	SessionIdle     time.Duration
}

// OIDCConfig configures sign-in with an OpenID provider.
type OIDCConfig struct {
	Issuer       string // CORRAL_OIDC_ISSUER
	ClientID     string // CORRAL_OIDC_CLIENT_ID
	ClientSecret string // CORRAL_OIDC_CLIENT_SECRET (environment only)
	// RedirectURL is CORRAL_OIDC_REDIRECT_URL; when empty it is derived
	// from the request as <scheme>://<host>/login/callback.
	RedirectURL string
	// LoginClaim names the claim that is the login: "email" (default;
	// only when email_verified is true), "preferred_username" or "sub".
	LoginClaim string
}

// Enabled reports whether OIDC sign-in is configured.
func (c OIDCConfig) Enabled() bool { return c.Issuer != "" }

// FromEnv reads the CORRAL_* auth variables. Flags may override the
// result before Validate.
func FromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Admins:    SplitList(getenv("CORRAL_ADMINS")),
		PeerToken: getenv("CORRAL_PEER_TOKEN"),
		OIDC: OIDCConfig{
			Issuer:       getenv("CORRAL_OIDC_ISSUER"),
			ClientID:     getenv("CORRAL_OIDC_CLIENT_ID"),
			ClientSecret: getenv("CORRAL_OIDC_CLIENT_SECRET"),
			RedirectURL:  getenv("CORRAL_OIDC_REDIRECT_URL"),
			LoginClaim:   getenv("CORRAL_OIDC_LOGIN_CLAIM"),
		},
	}
	if v := getenv("CORRAL_AUTH_REQUIRED"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("CORRAL_AUTH_REQUIRED=%q: accepted are 1, 0, true, false", v)
		}
		c.Required = b
	}
	if v := getenv("CORRAL_TRUSTED_PROXIES"); v != "" {
		p, err := ParsePrefixes(v)
		if err != nil {
			return c, fmt.Errorf("CORRAL_TRUSTED_PROXIES: %w", err)
		}
		c.TrustedProxies = p
	}
	switch v := getenv("CORRAL_TAILSCALE"); strings.ToLower(v) {
	case "", "0", "false":
	case "1", "true":
		c.Tailscale = "default"
	default:
		c.Tailscale = v
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"CORRAL_SESSION_LIFETIME", &c.SessionLifetime}, {"CORRAL_SESSION_IDLE", &c.SessionIdle}} {
		if v := getenv(d.name); v != "" {
			t, err := time.ParseDuration(v)
			if err != nil {
				return c, fmt.Errorf("%s=%q: a duration such as 12h is accepted", d.name, v)
			}
			*d.dst = t
		}
	}
	return c, nil
}

// Validate checks the configuration and fills in defaults.
func (c *Config) Validate() error {
	if c.SessionLifetime == 0 {
		c.SessionLifetime = 12 * time.Hour
	}
	if c.SessionIdle == 0 {
		c.SessionIdle = 2 * time.Hour
	}
	if c.SessionLifetime < time.Minute || c.SessionIdle < time.Minute {
		return fmt.Errorf("auth: session lifetime and idle timeout must be at least a minute")
	}
	if c.PeerToken != "" && len(c.PeerToken) < 16 {
		return fmt.Errorf("auth: CORRAL_PEER_TOKEN is shorter than 16 characters: use a long random token")
	}
	o := &c.OIDC
	if !o.Enabled() {
		return nil
	}
	if u, err := url.Parse(o.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("auth: the OIDC issuer %q is not an http(s) URL", o.Issuer)
	}
	if o.ClientID == "" {
		return fmt.Errorf("auth: the OIDC issuer is set but the client id is not (CORRAL_OIDC_CLIENT_ID)")
	}
	if o.RedirectURL != "" {
		if u, err := url.Parse(o.RedirectURL); err != nil || !u.IsAbs() {
			return fmt.Errorf("auth: the OIDC redirect URL %q is not an absolute URL", o.RedirectURL)
		}
	}
	switch o.LoginClaim {
	case "":
		o.LoginClaim = "email"
	case "email", "preferred_username", "sub":
	default:
		return fmt.Errorf("auth: the OIDC login claim %q is not accepted: use email, preferred_username or sub", o.LoginClaim)
	}
	return nil
}

// SplitList splits a comma-separated list, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ParsePrefixes parses a comma-separated list of CIDRs or addresses (an
// address is a prefix of its full length).
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range SplitList(s) {
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR", f)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address or a CIDR", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}
