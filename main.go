// Command corral is one web application over every place a team keeps
// virtual machines and containers. `corral serve` runs the dashboard, the
// REST API and the other surfaces; the other subcommands are thin callers
// of the same core.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/corral-dev/corral/app"
	"github.com/corral-dev/corral/app/doctor"
	"github.com/corral-dev/corral/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "corral:", err)
		}
		os.Exit(1)
	}
}

const usage = `usage: corral COMMAND [flags]

commands:
  serve                       run the dashboard and the APIs (default :8006)
  context list                list the contexts stored in the database
  context add libvirt NAME URI
  context add proxmox NAME URL USER@REALM!TOKENID [--insecure]
                              the token's secret is read from CORRAL_PROXMOX_SECRET
  context rm BACKEND NAME
  schedule tick|list|add|rm|enable|disable
                              power and snapshot schedules (corral schedule for details)
  audit verify                check the audit log's hash chain
  doctor [serve flags]        run every context's diagnostics
  pve token create USER@REALM TOKENID
                              create a Proxmox API token; prints USER@REALM!TOKENID=SECRET once
  pve token revoke USER@REALM TOKENID
  pve token list [USER@REALM]
  vdi pool create|list|delete, vdi assign|unassign, vdi ct-pool ...
                              administer VDI pools (corral vdi for details)
  version                     print the version
`

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(out, usage)
		return errors.New("a command is required")
	}
	switch args[0] {
	case "serve":
		cfg, err := app.ParseServe(args[1:], os.Getenv)
		if err != nil {
			return err
		}
		a, err := app.New(ctx, cfg)
		if err != nil {
			return err
		}
		defer a.Close()
		return a.Serve(ctx)
	case "version":
		v := "devel"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			v = bi.Main.Version
		}
		fmt.Fprintln(out, "corral", v)
		return nil
	case "context":
		return contextCmd(ctx, args[1:], out)
	case "audit":
		if len(args) != 2 || args[1] != "verify" {
			return errors.New("usage: corral audit verify")
		}
		st, err := openStore(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		n, err := st.VerifyAudit(ctx)
		if err != nil {
			return fmt.Errorf("audit log: %d rows intact before the break: %w", n, err)
		}
		fmt.Fprintf(out, "audit log intact: %d rows\n", n)
		return nil
	case "doctor":
		return doctorCmd(ctx, args[1:], out)
	case "pve":
		return pveCmd(ctx, args[1:], out)
	case "schedule":
		return scheduleCmd(ctx, args[1:], out)
	case "vdi":
		return vdiCmd(ctx, args[1:], out)
	case "help", "-h", "--help":
		fmt.Fprint(out, usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// openStore opens the database where `corral serve` would (CORRAL_DATA or
// the user's data directory).
func openStore(ctx context.Context) (*store.Store, error) {
	path, err := store.DefaultPath(os.Getenv("CORRAL_DATA"))
	if err != nil {
		return nil, err
	}
	return store.Open(ctx, path, store.Options{})
}

func contextCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: corral context list|add|rm")
	}
	st, err := openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	switch {
	case args[0] == "list" && len(args) == 1:
		cs, err := st.Contexts(ctx)
		if err != nil {
			return err
		}
		for _, c := range cs {
			fmt.Fprintf(out, "%s/%s\n", c.Backend, c.Name)
		}
		return nil
	case args[0] == "add" && len(args) == 4 && args[1] == "libvirt":
		conf, _ := json.Marshal(map[string]string{"uri": args[3]})
		if err := st.PutContext(ctx, store.Context{Backend: "libvirt", Name: args[2], Config: string(conf)}); err != nil {
			return err
		}
		fmt.Fprintf(out, "added libvirt/%s; restart corral serve to use it\n", args[2])
		return nil
	case args[0] == "add" && (len(args) == 5 || len(args) == 6 && args[5] == "--insecure") && args[1] == "proxmox":
		secret := os.Getenv("CORRAL_PROXMOX_SECRET") // never a flag: it would show in the process list
		if secret == "" {
			return errors.New("set CORRAL_PROXMOX_SECRET to the API token's secret")
		}
		conf, _ := json.Marshal(app.ProxmoxConfig{URL: args[3], TokenID: args[4], Secret: secret, Insecure: len(args) == 6})
		if err := st.PutContext(ctx, store.Context{Backend: "proxmox", Name: args[2], Config: string(conf)}); err != nil {
			return err
		}
		fmt.Fprintf(out, "added proxmox/%s; restart corral serve to use it\n", args[2])
		return nil
	case args[0] == "add":
		return errors.New("usage: corral context add libvirt NAME URI | corral context add proxmox NAME URL USER@REALM!TOKENID [--insecure]")
	case args[0] == "rm" && len(args) == 3:
		if err := st.DeleteContext(ctx, args[1], args[2]); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no context %s/%s", args[1], args[2])
		} else if err != nil {
			return err
		}
		fmt.Fprintf(out, "removed %s/%s\n", args[1], args[2])
		return nil
	}
	return errors.New("usage: corral context list | add libvirt NAME URI | add proxmox NAME URL TOKENID | rm BACKEND NAME")
}

// doctorCmd builds the contexts `corral serve` would, with the same flags
// and environment, and prints each one's diagnostics. It exits non-zero
// when a check fails.
func doctorCmd(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := app.ParseServe(args, os.Getenv)
	if err != nil {
		return err
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := app.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	failed := 0
	for _, r := range doctor.Run(ctx, a.Fleet.Backends(), 30*time.Second) {
		fmt.Fprintf(out, "%s\n", r.Context)
		if !r.Supported {
			fmt.Fprintln(out, "  (this backend has no diagnostics)")
		}
		for _, c := range r.Checks {
			mark := "ok  "
			if !c.OK {
				mark, failed = "FAIL", failed+1
			}
			fmt.Fprintf(out, "  %s %s: %s\n", mark, c.Name, c.Message)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d checks failed", failed)
	}
	return nil
}

// cliApp builds the application a command works on: the database and
// contexts `corral serve` would use (its environment), with a quiet log.
func cliApp(ctx context.Context) (*app.App, error) {
	cfg, err := app.ParseServe(nil, os.Getenv)
	if err != nil {
		return nil, err
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return app.New(ctx, cfg)
}

// pveCmd manages the Proxmox API's tokens in the database `corral serve`
// uses (CORRAL_DATA or the user's data directory).
func pveCmd(ctx context.Context, args []string, out io.Writer) error {
	const usage = "usage: corral pve token create|revoke USER@REALM TOKENID | corral pve token list [USER@REALM]"
	if len(args) < 2 || args[0] != "token" {
		return errors.New(usage)
	}
	a, err := cliApp(ctx)
	if err != nil {
		return err
	}
	defer a.Close()
	switch {
	case args[1] == "create" && len(args) == 4:
		v, err := a.PVE.CreateToken(ctx, args[2], args[3], "created with corral pve token create")
		if err != nil {
			return err
		}
		fmt.Fprintln(out, v) // the secret is shown this once; only its hash is kept
		return nil
	case args[1] == "revoke" && len(args) == 4:
		return a.PVE.RevokeToken(ctx, args[2], args[3])
	case args[1] == "list" && len(args) <= 3:
		user := ""
		if len(args) == 3 {
			user = args[2]
		}
		toks, err := a.PVE.Tokens(ctx, user)
		if err != nil {
			return err
		}
		for _, t := range toks {
			fmt.Fprintf(out, "%s!%s\t%s\t%s\n", t.UserID, t.TokenID, t.CreatedAt.Format(time.RFC3339), t.Comment)
		}
		return nil
	}
	return errors.New(usage)
}
