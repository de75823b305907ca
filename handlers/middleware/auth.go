package middleware

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/backends"
)

// Identify resolves the caller of every request (see auth.Resolver) and
// puts the identity in the request's context for IdentityFrom, Origin and
// the guards. It refuses nothing itself: the route's rule decides.
func Identify(res *auth.Resolver) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := res.Resolve(r)
			next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), id)))
		})
	}
}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id auth.Identity) context.Context {
	return context.WithValue(ctx, identityKey, id)
}

// IdentityFrom returns the caller Identify resolved, or an anonymous
// identity outside Identify.
func IdentityFrom(ctx context.Context) auth.Identity {
	id, ok := ctx.Value(identityKey).(auth.Identity)
	if !ok {
		return auth.Identity{Via: auth.ViaAnonymous}
	}
	return id
}

// Guard enforces the access rules of one surface. Each surface builds
// one in its route table and registers every route through Route, so the
// rule of each route is written next to it and can be read back by
// RuleOf (the access table test walks the router with chi.Walk and fails
// on any route without one).
type Guard struct {
	Policy  *auth.Policy
	Audit   *auth.Auditor // nil: refusals are not audited (unit tests)
	Surface string        // dashboard, rest, pve, console, desktops
	// Refuse writes the surface's answer to a refusal (an *auth.Refusal).
	Refuse func(w http.ResponseWriter, r *http.Request, err error)
}

// Check decides rule for the caller of r. A refused mutation (a rule that
// changes state or is privileged, or a method that is not safe) is
// audited with the outcome "refused".
func (g *Guard) Check(r *http.Request, rule auth.Rule) error {
	id := IdentityFrom(r.Context())
	policy := g.Policy
	if policy == nil {
		policy = auth.NewPolicy(nil, false)
	}
	err := policy.Decide(rule, id)
	if err != nil && (rule.Mutating() || !safeMethod(r.Method)) {
		action := r.Method
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			action += " " + rc.RoutePattern()
		}
		detail := "401 "
		if Status(err) == http.StatusForbidden {
			detail = "403 "
		}
		g.Audit.Record(r.Context(), id, g.Surface, action, r.URL.EscapedPath(), auth.OutcomeRefused, detail+backends.SafeMessage(err))
	}
	return err
}

// Ruled is a route's handler with its access rule.
type Ruled struct {
	Rule  auth.Rule
	guard *Guard
	next  http.Handler
}

// AccessRule returns the route's rule.
func (h *Ruled) AccessRule() auth.Rule { return h.Rule }

func (h *Ruled) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.guard.Check(r, h.Rule); err != nil {
		h.guard.refuse(w, r, err)
		return
	}
	h.next.ServeHTTP(w, r)
}

func (g *Guard) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if Status(err) == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="corral"`)
	}
	if g.Refuse != nil {
		g.Refuse(w, r, err)
		return
	}
	http.Error(w, backends.SafeMessage(err), Status(err))
}

// Wrap returns h guarded by rule.
func (g *Guard) Wrap(rule auth.Rule, h http.Handler) *Ruled {
	return &Ruled{Rule: rule, guard: g, next: h}
}

// Route registers h for method and pattern on r, guarded by rule: the
// one way a surface's route table adds a route.
func (g *Guard) Route(r chi.Router, method, pattern string, rule auth.Rule, h http.Handler) {
	r.Method(method, pattern, g.Wrap(rule, h))
}

// Require returns a middleware that guards every route after it with
// rule, for surfaces that mount a subrouter; prefer Route, whose rule the
// access table test can read.
func (g *Guard) Require(rule auth.Rule) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler { return g.Wrap(rule, next) }
}

// RequireAdmin is Require(auth.Admin); RequirePrivileged guards a GET that
// is as strong as a change (a console, a disk download).
func (g *Guard) RequireAdmin() func(http.Handler) http.Handler { return g.Require(auth.Admin) }

func (g *Guard) RequirePrivileged() func(http.Handler) http.Handler {
	return g.Require(auth.Privileged)
}

// RuleOf returns the access rule of a route as chi.Walk gives it: the
// endpoint's own (registered with Route), else the one of a Require
// middleware in its chain (a surface that guards a group).
func RuleOf(h http.Handler, mws ...func(http.Handler) http.Handler) (auth.Rule, bool) {
	if ch, ok := h.(*chi.ChainHandler); ok {
		h = ch.Endpoint
		mws = append(mws, ch.Middlewares...)
	}
	if rh, ok := h.(interface{ AccessRule() auth.Rule }); ok {
		return rh.AccessRule(), true
	}
	// A Require middleware wraps what it is given in a *Ruled: apply each
	// middleware to a handler that is never served and look.
	var rule auth.Rule
	for _, mw := range mws {
		if rh, ok := mw(http.NotFoundHandler()).(interface{ AccessRule() auth.Rule }); ok {
			rule = rh.AccessRule() // the innermost guard decides last
		}
	}
	return rule, rule != 0
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// CrossOrigin refuses cross-site requests that are not safe (POST, PUT,
// DELETE...) with net/http's CrossOriginProtection: a browser's
// Sec-Fetch-Site or Origin must name this site. Clients that are not
// browsers send neither header and pass: they carry no ambient cookie.
// A refusal is audited and answered with a 403 whose body suits the
// surface (JSON under /api).
func CrossOrigin(audit *auth.Auditor) func(http.Handler) http.Handler {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		surface := "dashboard"
		if strings.HasPrefix(r.URL.Path, "/api/") {
			surface = "rest"
		}
		audit.Record(r.Context(), IdentityFrom(r.Context()), surface, r.Method, r.URL.EscapedPath(), auth.OutcomeRefused,
			"403 cross-origin request from "+originOf(r))
		const msg = "cross-origin request refused: this change must come from a page of this server"
		if surface == "rest" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error":"` + msg + `"}` + "\n"))
			return
		}
		http.Error(w, msg, http.StatusForbidden)
	}))
	return p.Handler
}

// SameOriginWebSocket refuses a WebSocket handshake whose Origin header
// names another site (cross-site WebSocket hijacking: the browser sends
// the session cookie with it). A handshake without Origin comes from a
// client that is not a browser and carries no ambient credentials.
func SameOriginWebSocket(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !SameOrigin(r) {
			http.Error(w, "cross-origin WebSocket refused", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// SameOrigin reports whether r's Origin header is absent or names r's own
// host.
func SameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

func originOf(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" {
		return o
	}
	return "a site named by Sec-Fetch-Site: " + r.Header.Get("Sec-Fetch-Site")
}
