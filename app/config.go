package app

import (
	"cmp"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/app/auth"
)

// Config is everything `corral serve` needs. It is built from flags and
// the environment by ParseServe; nothing reads the environment later.
type Config struct {
	Addr     string // listen address, default ":8006"
	DataDir  string // where corral.db lives; default the user's data directory
	Demo     bool   // add a simulated fleet
	DemoSize int    // instances in the simulated fleet
	// Accel is the local context's QEMU accelerator: auto (probe KVM, else
	// TCG), tcg or kvm.
	Accel string
	// Kubeconfig offers a KubeVirt context per context of this kubeconfig,
	// read and never written; a missing file offers none.
	Kubeconfig string
	// Libvirt lists extra libvirt contexts as NAME=URI.
	Libvirt []string
	// RefreshInterval and ContextTimeout tune the fleet; zero means the
	// fleet's defaults.
	RefreshInterval time.Duration
	ContextTimeout  time.Duration
	Logger          *slog.Logger
	// ScheduleTick is how often `corral serve` evaluates the schedules;
	// 0 disables the loop (a systemd timer runs `corral schedule tick`).
	ScheduleTick time.Duration
	// SchedulerImage is the image of in-cluster schedules' CronJobs;
	// empty means schedule.DefaultImage.
	SchedulerImage string
	// Auth is identity and access: the admin allowlist, auth-required,
	// trusted proxies, tailscaled, OIDC sign-in and the peer token.
	Auth auth.Config
	// VDI is the desktop broker (CORRAL_VDI_*; see app/vdi.go).
	VDI VDIConfig
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// ParseServe parses `corral serve` arguments. Each flag can also be set
// through the environment (CORRAL_ADDR, CORRAL_DATA, CORRAL_DEMO,
// CORRAL_DEMO_SIZE, CORRAL_LIBVIRT as comma-separated NAME=URI, and the
// auth variables of auth.FromEnv); a flag wins over the environment.
// Secrets (CORRAL_OIDC_CLIENT_SECRET, CORRAL_PEER_TOKEN) have no flag, so
// they never show in a process list.
func ParseServe(args []string, getenv func(string) string) (Config, error) {
	cfg := Config{Addr: ":8006", DemoSize: 200}
	if v := getenv("CORRAL_ADDR"); v != "" {
		cfg.Addr = v
	}
	cfg.DataDir = getenv("CORRAL_DATA")
	cfg.Accel = cmp.Or(getenv("CORRAL_ACCEL"), "auto")
	if v := getenv("CORRAL_DEMO"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("CORRAL_DEMO=%q: accepted are 1, 0, true, false", v)
		}
		cfg.Demo = b
	}
	if v := getenv("CORRAL_DEMO_SIZE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return cfg, fmt.Errorf("CORRAL_DEMO_SIZE=%q: a whole number is accepted", v)
		}
		cfg.DemoSize = n
	}
	var libvirt listFlag
	if v := getenv("CORRAL_LIBVIRT"); v != "" {
		libvirt = strings.Split(v, ",")
	}
	fs := flag.NewFlagSet("corral serve", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen on `HOST:PORT` (env CORRAL_ADDR)")
	fs.StringVar(&cfg.DataDir, "data", cfg.DataDir, "keep the database in `DIR` (env CORRAL_DATA; default $XDG_DATA_HOME/corral)")
	fs.BoolVar(&cfg.Demo, "demo", cfg.Demo, "add a simulated fleet (env CORRAL_DEMO)")
	fs.IntVar(&cfg.DemoSize, "demo-size", cfg.DemoSize, "instances in the simulated fleet (env CORRAL_DEMO_SIZE)")
	fs.StringVar(&cfg.Accel, "accel", cfg.Accel, "QEMU accelerator of the local context: auto, tcg or kvm (env CORRAL_ACCEL)")
	cfg.Kubeconfig = getenv("CORRAL_KUBECONFIG")
	if cfg.Kubeconfig == "" && getenv("HOME") != "" {
		cfg.Kubeconfig = filepath.Join(getenv("HOME"), ".kube", "config")
	}
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", cfg.Kubeconfig, "offer a KubeVirt context per context of the kubeconfig at `PATH`, read and never written (env CORRAL_KUBECONFIG; default ~/.kube/config)")
	fs.Var(&libvirt, "libvirt", "add a libvirt context `NAME=URI`, e.g. test=test:///default (repeatable; env CORRAL_LIBVIRT)")
	fs.DurationVar(&cfg.RefreshInterval, "refresh", 0, "refresh the inventory every `DURATION` (default 10s)")
	fs.DurationVar(&cfg.ContextTimeout, "context-timeout", 0, "give each context `DURATION` to answer (default 8s)")
	if err := scheduleFlags(fs, &cfg, getenv); err != nil {
		return cfg, err
	}
	ac, err := auth.FromEnv(getenv)
	if err != nil {
		return cfg, err
	}
	admins := strings.Join(ac.Admins, ",")
	var proxies string
	for i, p := range ac.TrustedProxies {
		if i > 0 {
			proxies += ","
		}
		proxies += p.String()
	}
	fs.StringVar(&admins, "admins", admins, "admin allowlist: comma-separated `LOGINS`; without it every caller is an admin (env CORRAL_ADMINS)")
	fs.BoolVar(&ac.Required, "auth-required", ac.Required, "refuse every anonymous request (env CORRAL_AUTH_REQUIRED)")
	fs.StringVar(&proxies, "trusted-proxies", proxies, "believe Tailscale-User-* headers only from these `CIDRS` (env CORRAL_TRUSTED_PROXIES)")
	fs.StringVar(&ac.Tailscale, "tailscale", ac.Tailscale, "ask tailscaled who connects: \"default\" or a socket `PATH` (env CORRAL_TAILSCALE=1 or a path)")
	fs.StringVar(&ac.OIDC.Issuer, "oidc-issuer", ac.OIDC.Issuer, "sign in with the OpenID provider at `URL` (env CORRAL_OIDC_ISSUER; the secret only as CORRAL_OIDC_CLIENT_SECRET)")
	fs.StringVar(&ac.OIDC.ClientID, "oidc-client-id", ac.OIDC.ClientID, "OIDC client `ID` (env CORRAL_OIDC_CLIENT_ID)")
	fs.StringVar(&ac.OIDC.RedirectURL, "oidc-redirect-url", ac.OIDC.RedirectURL, "OIDC redirect `URL`, default <this server>/login/callback (env CORRAL_OIDC_REDIRECT_URL)")
	fs.StringVar(&ac.OIDC.LoginClaim, "oidc-login-claim", ac.OIDC.LoginClaim, "the claim that is the login: email (verified), preferred_username or sub (env CORRAL_OIDC_LOGIN_CLAIM)")
	fs.DurationVar(&ac.SessionLifetime, "session-lifetime", ac.SessionLifetime, "end a signed-in session after `DURATION` (default 12h; env CORRAL_SESSION_LIFETIME)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	ac.Admins = auth.SplitList(admins)
	if ac.TrustedProxies, err = auth.ParsePrefixes(proxies); err != nil {
		return cfg, fmt.Errorf("--trusted-proxies: %w", err)
	}
	if err := ac.Validate(); err != nil {
		return cfg, err
	}
	cfg.Auth = ac
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("corral serve takes no arguments, got %q", fs.Args())
	}
	if cfg.Accel != "auto" && cfg.Accel != "tcg" && cfg.Accel != "kvm" {
		return cfg, fmt.Errorf("--accel %q: accepted are auto, tcg and kvm", cfg.Accel)
	}
	if cfg.DemoSize < 0 || cfg.DemoSize > 100000 {
		return cfg, fmt.Errorf("--demo-size %d: accepted are 0 to 100000", cfg.DemoSize)
	}
	for _, l := range libvirt {
		if name, uri, ok := strings.Cut(l, "="); !ok || name == "" || uri == "" {
			return cfg, fmt.Errorf("--libvirt %q: accepted is NAME=URI, e.g. test=test:///default", l)
		}
	}
	cfg.Libvirt = libvirt
	if cfg.VDI, err = parseVDI(getenv); err != nil {
		return cfg, err
	}
	return cfg, nil
}
