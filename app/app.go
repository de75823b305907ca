// Package app is the composition root: it builds the store, the backends,
// the use cases and the HTTP server from a Config, and is the one package
// that imports everything. The use-case packages under app/ never import
// handlers or views.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"
	"github.com/klauspost/compress/gzhttp"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/folders"
	"github.com/corral-dev/corral/app/images"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/move"
	apppve "github.com/corral-dev/corral/app/pve"
	"github.com/corral-dev/corral/app/schedule"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/handlers/api"
	"github.com/corral-dev/corral/handlers/console"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/handlers/pve"
	"github.com/corral-dev/corral/handlers/ui"
	"github.com/corral-dev/corral/static"
	"github.com/corral-dev/corral/store"
)

// App is a built Corral server.
type App struct {
	// PVE is the Proxmox VE compatibility layer (/api2/json).
	PVE       *apppve.Service
	cfg       Config
	log       *slog.Logger
	Store     *store.Store
	Fleet     *fleet.Fleet
	Tasks     *tasks.Manager
	Instances *instances.Service
	// Folders is the folder tree and its bulk actions (ADR-0008).
	Folders *folders.Service
	// Move plans and runs cold moves between backends (ADR-0010).
	Move *move.Service
	// Schedules are the power and snapshot schedules and their tick.
	Schedules *schedule.Service
	handler   http.Handler
	closers   []func() error
	cancel    context.CancelFunc

	// kube returns a KubeVirt context's Kubernetes clients, built once.
	kube vdi.Kube

	// Identity and access (see app/auth and docs/security.md).
	policy   *auth.Policy
	auditor  *auth.Auditor
	resolver *auth.Resolver
	sessions *scs.SessionManager // nil without OIDC
	oidc     *auth.OIDC          // nil without OIDC

	// VDI is the desktop pools and broker (app/vdi.go).
	VDI *vdi.Service
}

// New builds the application: it opens the store (applying migrations),
// marks tasks a previous run left running as interrupted, and builds the
// fleet from the configured contexts.
func New(ctx context.Context, cfg Config) (*App, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	path, err := store.DefaultPath(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, log: log, Store: st}
	a.closers = append(a.closers, st.Close)
	a.Tasks = tasks.New(st, tasks.Options{Logger: log})
	if ids, err := a.Tasks.Recover(ctx); err != nil {
		a.Close()
		return nil, fmt.Errorf("app: recover tasks: %w", err)
	} else if len(ids) > 0 {
		log.Warn("app: tasks interrupted by the last stop", "tasks", ids)
	}
	a.Fleet = fleet.New(fleet.Options{Interval: cfg.RefreshInterval, Timeout: cfg.ContextTimeout, Logger: log})
	if err := a.addContexts(ctx, filepath.Dir(path)); err != nil {
		a.Close()
		return nil, err
	}
	a.Instances = instances.New(a.Fleet, a.Tasks, st, log,
		instances.WithImages(&images.Resolver{Dir: filepath.Join(filepath.Dir(path), "images")}))
	a.Folders = folders.New(st, a.Fleet, a.Tasks, a.Instances, folders.Options{})
	a.Move = move.New(a.Fleet, a.Tasks, move.Options{Registry: st, Logger: log})
	a.kube = a.kubeClients()
	a.buildSchedules()
	a.buildVDI()
	if err := a.buildAuth(); err != nil {
		a.Close()
		return nil, err
	}
	if a.PVE, err = apppve.New(ctx, apppve.Options{Fleet: a.Fleet, Instances: a.Instances, Tasks: a.Tasks,
		Store: st, Policy: a.policy, Log: log}); err != nil {
		a.Close()
		return nil, fmt.Errorf("app: pve: %w", err)
	}
	assets, err := static.New()
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("app: static assets: %w", err)
	}
	a.handler = a.routes(assets)
	log.Info("app: ready", "database", path, "contexts", len(a.Fleet.Backends()))
	return a, nil
}

// buildAuth builds the access policy, the audit of refusals, and, when
// OIDC is configured, the sign-in and its sessions (kept in the store).
func (a *App) buildAuth() error {
	ac := a.cfg.Auth
	if err := ac.Validate(); err != nil {
		return err
	}
	a.policy = auth.NewPolicy(ac.Admins, ac.Required)
	a.auditor = auth.NewAuditor(a.Store, a.log)
	opts := auth.ResolverOptions{Log: a.log}
	if ac.OIDC.Enabled() {
		sm := scs.New()
		sm.Store = a.Store.Sessions()
		sm.HashTokenInStore = true
		sm.Lifetime = ac.SessionLifetime
		sm.IdleTimeout = ac.SessionIdle
		sm.Cookie.Name = "corral_session"
		sm.Cookie.HttpOnly = true
		sm.Cookie.SameSite = http.SameSiteLaxMode // the provider's redirect back is a top-level GET
		sm.Cookie.Secure = strings.HasPrefix(ac.OIDC.RedirectURL, "https:") || strings.HasPrefix(ac.OIDC.Issuer, "https:")
		sm.ErrorFunc = func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				// The client went away (a browser cancelling a superseded
				// fetch): nobody reads the answer, and nothing failed.
				a.log.Debug("app: request cancelled by the client", "request_id", middleware.RequestIDFrom(r.Context()))
				return
			}
			a.log.Error("app: session store failed", "request_id", middleware.RequestIDFrom(r.Context()), "err", err)
			http.Error(w, "internal error (request "+middleware.RequestIDFrom(r.Context())+")", http.StatusInternalServerError)
		}
		a.sessions = sm
		opts.Sessions = sm
		a.oidc = auth.NewOIDC(ac.OIDC, nil, a.log)
	}
	a.resolver = auth.NewResolver(ac, a.policy, opts)
	if a.policy.OpenMode() {
		a.log.Warn("app: open mode: no admin allowlist (CORRAL_ADMINS), every caller is an admin")
	}
	return nil
}

// routes builds the router of every surface. Identity is resolved for
// every request but static assets; each surface's route table states the
// access rule of each of its routes (middleware.Guard), and unsafe
// cross-site requests are refused before any of them.
func (a *App) routes(assets *static.Assets) http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Log(a.log))
	public := &middleware.Guard{Surface: "static"}
	r.Handle("/static/*", public.Wrap(auth.Public, assets.Handler()))
	compress, err := gzhttp.NewWrapper(gzhttp.ExceptContentTypes([]string{"text/event-stream"}))
	if err != nil {
		panic(err) // the options are constant: a failure is a programming error
	}
	// The Proxmox VE API: its own credentials (tickets, API tokens), and
	// outside the compression group: its error writer sets PVE's status
	// line on the raw connection.
	r.Route("/api2/json", func(r chi.Router) {
		pve.Mount(r, pve.Deps{Service: a.PVE, Policy: a.policy, Audit: a.auditor, Admins: a.cfg.Auth.Admins, Log: a.log})
	})
	// Consoles: outside the compression group (a WebSocket takes over the
	// connection); privileged although they are GETs; the bridge checks the
	// WebSocket's origin itself.
	consoles := &middleware.Guard{Policy: a.policy, Audit: a.auditor, Surface: "console"}
	r.Group(func(r chi.Router) {
		if a.sessions != nil {
			r.Use(a.sessions.LoadAndSave)
		}
		r.Use(middleware.Identify(a.resolver))
		cd := console.Deps{Fleet: a.Fleet, Instances: a.Instances, Assets: assets, Log: a.log,
			Authorize: consoles.RequirePrivileged(), TrustedProxies: a.cfg.Auth.TrustedProxies}
		if b := a.vdiBroker(); b != nil {
			// Private consoles: a desktop's holder opens its consoles,
			// no other instance's (consoleAllow, in app/vdi.go).
			cd.Sessions, cd.Authorize, cd.Allow = b, consoles.Require(auth.Holder), a.consoleAllow(b)
		}
		console.Mount(r, cd)
	})
	r.Group(func(r chi.Router) {
		if a.sessions != nil {
			r.Use(a.sessions.LoadAndSave)
		}
		r.Use(middleware.Identify(a.resolver), middleware.CrossOrigin(a.auditor))
		r.Use(func(h http.Handler) http.Handler { return compress(h) })
		api.MountHealth(r, api.HealthDeps{Store: a.Store})
		r.Route("/api", func(r chi.Router) {
			api.Mount(r, api.Deps{Instances: a.Instances, Fleet: a.Fleet, Tasks: a.Tasks, Log: a.log, Policy: a.policy, Audit: a.auditor, PVE: a.PVE,
				Folders: a.Folders, Move: a.Move, Schedules: a.Schedules, VDI: a.vdiBroker()})
		})
		ui.Mount(r, ui.Deps{Instances: a.Instances, Fleet: a.Fleet, Tasks: a.Tasks, Assets: assets, Log: a.log,
			Policy: a.policy, Audit: a.auditor, Sessions: a.sessions, OIDC: a.oidc, PVE: a.PVE,
			Folders: a.Folders, Move: a.Move, Schedules: a.Schedules, VDI: a.vdiBroker()})
	})
	return r
}

// Handler returns the HTTP handler of every surface.
func (a *App) Handler() http.Handler { return a.handler }

// Start runs the background loops (the fleet refresh) until ctx ends or
// Close is called. It returns at once.
func (a *App) Start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	a.cancel = cancel
	go a.Fleet.Run(ctx)
	go a.runSchedules(ctx)
	if b := a.vdiBroker(); b != nil {
		go b.Run(ctx)
	}
	if a.sessions != nil {
		go a.expireSessions(ctx, 10*time.Minute)
	}
}

// expireSessions deletes expired sign-in sessions every interval (they
// are never found once expired; this only reclaims the rows).
func (a *App) expireSessions(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := a.Store.Sessions().DeleteExpired(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("app: deleting expired sessions failed", "err", err)
			}
		}
	}
}

// Serve starts the background loops and serves HTTP on cfg.Addr until ctx
// ends, then shuts down gracefully.
func (a *App) Serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return fmt.Errorf("app: listen: %w", err)
	}
	a.Start(ctx)
	srv := &http.Server{Handler: a.handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)}
	a.log.Info("app: serving", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// Close stops the background loops and tasks and closes what New opened.
func (a *App) Close() error {
	if a.cancel != nil {
		a.cancel()
	}
	if a.Tasks != nil {
		a.Tasks.Close()
	}
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	return errors.Join(errs...)
}
