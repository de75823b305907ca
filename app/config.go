package app

import (
	"cmp"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
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
	// Libvirt lists extra libvirt contexts as NAME=URI.
	Libvirt []string
	// RefreshInterval and ContextTimeout tune the fleet; zero means the
	// fleet's defaults.
	RefreshInterval time.Duration
	ContextTimeout  time.Duration
	Logger          *slog.Logger
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
// CORRAL_DEMO_SIZE, CORRAL_LIBVIRT as comma-separated NAME=URI); a flag
// wins over the environment.
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
	fs.Var(&libvirt, "libvirt", "add a libvirt context `NAME=URI`, e.g. test=test:///default (repeatable; env CORRAL_LIBVIRT)")
	fs.DurationVar(&cfg.RefreshInterval, "refresh", 0, "refresh the inventory every `DURATION` (default 10s)")
	fs.DurationVar(&cfg.ContextTimeout, "context-timeout", 0, "give each context `DURATION` to answer (default 8s)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
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
	return cfg, nil
}
