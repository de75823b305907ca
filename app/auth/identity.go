// Package auth is who may do what in Corral: the identity of a caller,
// resolved only from the request pipeline (a Tailscale peer, the identity
// headers of a trusted `tailscale serve` proxy, an OIDC session, the peer
// token), the access rules every route declares, and the policy that
// decides a rule for an identity (the CORRAL_ADMINS allowlist, open mode,
// CORRAL_AUTH_REQUIRED).
//
// A request body or query never names the caller: nothing in this package
// reads either.
package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/corral-dev/corral/backends"
)

// Via says where an identity came from.
type Via string

const (
	ViaAnonymous Via = "anonymous"
	ViaTailscale Via = "tailscale"
	ViaOIDC      Via = "oidc"
	ViaPeer      Via = "peer"
)

// PeerActor is the audit actor of a request authenticated with the peer
// token: a service, never a user.
const PeerActor = "corral-peer"

// Identity is the caller of one request.
type Identity struct {
	Login string // e.g. "alice@example.com"; "" when anonymous or a peer
	Name  string // display name; may be ""
	Via   Via
	// Admin reports whether the caller may change state: an allowlisted
	// login, any caller in open mode, or the peer token.
	Admin bool
	// Rejected is set when the request carried credentials that did not
	// verify (a wrong bearer token): it is refused everywhere but on
	// public routes, even in open mode.
	Rejected string
}

// Anonymous reports whether the caller has no identity.
func (id Identity) Anonymous() bool { return id.Via == ViaAnonymous || id.Via == "" }

// User reports whether the caller is a person (not anonymous, not a peer).
func (id Identity) User() bool { return id.Via == ViaTailscale || id.Via == ViaOIDC }

// Actor is the name the audit log records for the caller.
func (id Identity) Actor() string {
	switch {
	case id.Via == ViaPeer:
		return PeerActor
	case id.Login != "":
		return id.Login
	}
	return "anonymous"
}

// Display is what the dashboard shows for the caller.
func (id Identity) Display() string {
	if id.Name != "" && id.Login != "" && id.Name != id.Login {
		return id.Name + " (" + id.Login + ")"
	}
	return id.Actor()
}

// Rule is the access rule of a route: who may call it. Every route of
// every surface declares one in its surface's route table.
type Rule int

const (
	// Public routes answer everyone, also when authentication is
	// required: health probes, static assets, the login flow.
	Public Rule = iota + 1
	// Read routes answer any caller that is not refused: anonymous ones
	// only while authentication is not required. They change nothing.
	Read
	// Admin routes change state: admins and the peer token.
	Admin
	// Privileged routes are GET requests that are as strong as a change:
	// opening a console, downloading a disk. Admins and the peer token.
	Privileged
	// User routes are the self-service ones (VDI desktops): any signed-in
	// person; a peer is a service, not a user, and is refused.
	User
	// Holder routes are the consoles while the VDI broker runs: as
	// Privileged, except that a signed-in person who is not an admin is
	// let through to the route's own check, which opens only the consoles
	// of a desktop that person holds (console.Deps.Allow) and refuses
	// every other instance with 403.
	Holder
)

var ruleNames = map[Rule]string{Public: "public", Read: "read", Admin: "admin", Privileged: "privileged", User: "user", Holder: "holder"}

func (r Rule) String() string {
	if s, ok := ruleNames[r]; ok {
		return s
	}
	return fmt.Sprintf("Rule(%d)", int(r))
}

// Mutating reports whether a refusal of this rule is a refused mutation,
// which the audit log records.
func (r Rule) Mutating() bool { return r == Admin || r == Privileged || r == User || r == Holder }

// ErrUnauthenticated is the kind of a refusal for want of an identity
// (HTTP 401). ErrForbidden is the kind of a refusal of an identity that
// may not do this (HTTP 403).
var (
	ErrUnauthenticated = errors.New("auth: not signed in")
	ErrForbidden       = backends.ErrForbidden
)

// Refusal is a refused request. Msg is safe to show to the caller.
type Refusal struct {
	Kind error // ErrUnauthenticated or ErrForbidden
	Msg  string
}

func (e *Refusal) Error() string { return e.Kind.Error() + ": " + e.Msg }
func (e *Refusal) Unwrap() error { return e.Kind }

// Safe returns the message shown to the caller (see backends.SafeMessage).
func (e *Refusal) Safe() string { return e.Msg }

// Policy decides rules for identities. Its zero value is open mode with
// anonymous access.
type Policy struct {
	admins   []string // lowercased; nil means open mode
	required bool
}

// NewPolicy returns the policy of an allowlist (nil or empty: open mode)
// and of CORRAL_AUTH_REQUIRED.
func NewPolicy(admins []string, required bool) *Policy {
	p := &Policy{required: required}
	for _, a := range admins {
		if a = strings.ToLower(strings.TrimSpace(a)); a != "" {
			p.admins = append(p.admins, a)
		}
	}
	return p
}

// OpenMode reports whether there is no allowlist, so every caller is an
// admin.
func (p *Policy) OpenMode() bool { return len(p.admins) == 0 }

// Enforced reports whether an allowlist restricts changes to admins.
func (p *Policy) Enforced() bool { return !p.OpenMode() }

// Required reports whether anonymous requests are refused.
func (p *Policy) Required() bool { return p.required }

// IsAdmin reports whether an identified login is an admin.
func (p *Policy) IsAdmin(login string) bool {
	return p.OpenMode() || slices.Contains(p.admins, strings.ToLower(login))
}

// Complete sets id.Admin from the policy: the peer token is a trusted
// service; anyone is an admin in open mode (anonymous callers too, while
// authentication is not required); otherwise only allowlisted logins.
func (p *Policy) Complete(id Identity) Identity {
	switch {
	case id.Rejected != "":
		id.Admin = false
	case id.Via == ViaPeer:
		id.Admin = true
	case id.Anonymous():
		id.Admin = p.OpenMode() && !p.required
	default:
		id.Admin = p.IsAdmin(id.Login)
	}
	return id
}

// Decide returns nil when id may call a route of rule, else a *Refusal
// whose Kind says 401 or 403.
func (p *Policy) Decide(rule Rule, id Identity) error {
	if rule == Public {
		return nil
	}
	if id.Rejected != "" {
		return &Refusal{Kind: ErrUnauthenticated, Msg: id.Rejected}
	}
	if id.Anonymous() && (p.required || rule == User) {
		return &Refusal{Kind: ErrUnauthenticated, Msg: "sign in first: this server refuses anonymous requests"}
	}
	switch rule {
	case Read:
		return nil
	case Admin, Privileged, Holder:
		if id.Admin || rule == Holder && id.User() {
			return nil
		}
		if id.Anonymous() {
			return &Refusal{Kind: ErrUnauthenticated, Msg: "sign in first: only admins may do this"}
		}
		return &Refusal{Kind: ErrForbidden, Msg: id.Actor() + " is not an admin: this is read only for you"}
	case User:
		if id.User() {
			return nil
		}
		return &Refusal{Kind: ErrForbidden, Msg: "the peer token is a service identity, not a user"}
	}
	return &Refusal{Kind: ErrForbidden, Msg: "this route has no access rule"}
}
