package pve

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// ViaPVE marks identities authenticated by a PVE ticket or API token.
const ViaPVE auth.Via = "pve"

// TicketLifetime is how long a ticket is valid, as in PVE.
const TicketLifetime = 2 * time.Hour

// Authentication failures, in PVE's words.
const (
	msgNoTicket    = "No ticket"
	msgAuthFailure = "authentication failure"
	msgBadCSRF     = "Permission check failed (invalid csrf token)"
)

var (
	userRe  = regexp.MustCompile(`^[^\s:/!@]+@[A-Za-z][A-Za-z0-9.\-_]+$`)
	tokenRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9.\-_]{1,63}$`)
)

// ValidUser reports whether userid is a PVE user id (name@realm).
func ValidUser(userid string) bool { return userRe.MatchString(userid) }

// Authenticate returns the caller of r from, in pveproxy's order, the
// PVEAuthCookie cookie, an `Authorization: PVEAuthCookie=` header and an
// `Authorization: PVEAPIToken=USER@REALM!ID=SECRET` header. A request
// without credentials, or with ones that do not verify, gets an identity
// with Rejected set (401 on every route but the login). The login is the
// PVE user id: the admin allowlist names it like any login.
func (s *Service) Authenticate(r *http.Request) auth.Identity {
	ticket, viaTicket := "", false
	if c, err := r.Cookie("PVEAuthCookie"); err == nil && c.Value != "" {
		ticket, viaTicket = c.Value, true
	}
	h := r.Header.Get("Authorization")
	if !viaTicket && strings.HasPrefix(h, "PVEAuthCookie=") {
		ticket, viaTicket = strings.TrimPrefix(h, "PVEAuthCookie="), true
	}
	switch {
	case viaTicket:
		user, err := s.verifyTicket(ticket)
		if err != nil {
			return rejected(msgAuthFailure)
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !s.verifyCSRF(user, r.Header.Get("CSRFPreventionToken")) {
			return rejected(msgBadCSRF)
		}
		return s.Policy.Complete(auth.Identity{Login: user, Name: user, Via: ViaPVE})
	case strings.HasPrefix(h, "PVEAPIToken="):
		v := strings.TrimPrefix(h, "PVEAPIToken=")
		// proxmoxer sends "PVEAPIToken=user!name=value" too (with ':').
		id, secret, ok := strings.Cut(v, "=")
		if !ok {
			id, secret, ok = strings.Cut(v, ":")
		}
		user, tokenid, ok2 := strings.Cut(id, "!")
		if !ok || !ok2 {
			return rejected(msgAuthFailure)
		}
		good, err := s.Store.VerifyPVEToken(r.Context(), user, tokenid, strings.TrimSpace(secret))
		if err != nil || !good {
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				s.Log.Error("pve: token check failed", "err", err)
			}
			return rejected(msgAuthFailure)
		}
		return s.Policy.Complete(auth.Identity{Login: user, Name: id, Via: ViaPVE})
	case h != "":
		return rejected(msgAuthFailure)
	}
	return rejected(msgNoTicket)
}

func rejected(msg string) auth.Identity {
	return auth.Identity{Via: auth.ViaAnonymous, Rejected: msg}
}

// Ticket is the answer of POST /access/ticket.
type Ticket struct {
	Username string                    `json:"username"`
	Ticket   string                    `json:"ticket"`
	CSRF     string                    `json:"CSRFPreventionToken"`
	Cluster  string                    `json:"clustername"`
	Cap      map[string]map[string]int `json:"cap"`
}

// Login issues a ticket. Corral keeps no passwords: the password is the
// secret of one of the user's API tokens, or a valid ticket of the user
// (PVE's renewal). Anything else is PVE's 401 "authentication failure".
func (s *Service) Login(ctx context.Context, username, password, realm string) (Ticket, error) {
	if realm != "" && !strings.Contains(username, "@") {
		username += "@" + realm
	}
	fail := &Error{Status: 401, Msg: msgAuthFailure}
	if !ValidUser(username) || password == "" {
		return Ticket{}, fail
	}
	if u, err := s.verifyTicket(password); err == nil {
		if u != username {
			return Ticket{}, fail
		}
	} else if tok, err := s.Store.VerifyPVEUserSecret(ctx, username, password); err != nil || tok == "" {
		return Ticket{}, fail
	}
	now := s.Now()
	return Ticket{Username: username, Ticket: s.ticket(username, now), CSRF: s.csrf(username, now), Cluster: s.ClusterName,
		Cap: caps(s.Policy.IsAdmin(username))}, nil
}

func (s *Service) mac(parts ...string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return base64.RawStdEncoding.EncodeToString(m.Sum(nil))
}

// ticket returns "PVE:USER:HEXTIME::SIG", PVE's layout with an HMAC
// signature instead of PVE's RSA one.
func (s *Service) ticket(user string, at time.Time) string {
	plain := fmt.Sprintf("PVE:%s:%08X", user, at.Unix())
	return plain + "::" + s.mac("ticket", plain)
}

func (s *Service) verifyTicket(t string) (string, error) {
	plain, sig, ok := strings.Cut(t, "::")
	parts := strings.Split(plain, ":")
	if !ok || len(parts) != 3 || parts[0] != "PVE" || !hmac.Equal([]byte(sig), []byte(s.mac("ticket", plain))) {
		return "", errors.New("pve: ticket does not verify")
	}
	ts, err := strconv.ParseInt(parts[2], 16, 64)
	if err != nil {
		return "", errors.New("pve: ticket does not verify")
	}
	age := s.Now().Sub(time.Unix(ts, 0))
	if age > TicketLifetime || age < -5*time.Minute {
		return "", errors.New("pve: ticket expired")
	}
	return parts[1], nil
}

func (s *Service) csrf(user string, at time.Time) string {
	ts := fmt.Sprintf("%08X", at.Unix())
	return ts + ":" + s.mac("csrf", ts, user)
}

func (s *Service) verifyCSRF(user, tok string) bool {
	ts, sig, ok := strings.Cut(tok, ":")
	return ok && hmac.Equal([]byte(sig), []byte(s.mac("csrf", ts, user)))
}

// CreateToken creates API token tokenid for userid and returns the whole
// value to send, "USER@REALM!TOKENID=SECRET". The secret is shown this
// once: only its SHA-256 is stored. The REST API, the dashboard and the
// CLI (`corral pve token create`) call this.
func (s *Service) CreateToken(ctx context.Context, userid, tokenid, comment string) (string, error) {
	if !ValidUser(userid) {
		return "", backends.Invalidf("user %q is not a PVE user id: use NAME@REALM, e.g. alice@pve", userid)
	}
	if !tokenRe.MatchString(tokenid) {
		return "", backends.Invalidf("token id %q is not accepted: use 2 to 64 letters, digits, '.', '-', '_', starting with a letter", tokenid)
	}
	secret := uuid()
	err := s.Store.CreatePVEToken(ctx, store.PVEToken{UserID: userid, TokenID: tokenid, Comment: comment}, secret)
	if errors.Is(err, store.ErrExists) {
		return "", backends.Conflictf("token %s!%s exists already: revoke it first", userid, tokenid)
	}
	if err != nil {
		return "", err
	}
	return userid + "!" + tokenid + "=" + secret, nil
}

// RevokeToken deletes a token; it returns an error wrapping
// store.ErrNotFound when there is none.
func (s *Service) RevokeToken(ctx context.Context, userid, tokenid string) error {
	err := s.Store.DeletePVEToken(ctx, userid, tokenid)
	if errors.Is(err, store.ErrNotFound) {
		return backends.NotFoundf("token %s!%s does not exist", userid, tokenid)
	}
	if err != nil {
		return fmt.Errorf("pve: revoke token %s!%s: %w", userid, tokenid, err)
	}
	return nil
}

// Tokens lists the tokens of userid (every user when empty), without
// their secrets, which are not kept.
func (s *Service) Tokens(ctx context.Context, userid string) ([]store.PVEToken, error) {
	return s.Store.PVETokens(ctx, userid)
}

// uuid returns a random UUID (version 4), the form of PVE's token
// secrets (bpg checks [a-zA-Z0-9-]).
func uuid() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
