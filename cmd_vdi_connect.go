package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/vdi"
)

// vdiConnect is `corral vdi connect DESKTOP [--kind vm|ct] [--user LOGIN]
// [--url BASE] [--open]`: the broker's connect answer (spec/vdi.md,
// Connect) for a desktop, probed now from this machine: the target
// console page, the fallbacks in order and what was skipped and why.
// Without --user the caller is the local admin; with it, LOGIN must hold
// the desktop. --url prefixes the console pages with the server's
// address. --kind tells a CT member from a VM desktop of the same name.
// --open starts a client on the target (openCommand).
func vdiConnect(ctx context.Context, svc *vdi.Service, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("corral vdi connect", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	user := fs.String("user", "", "require that `LOGIN` holds the desktop")
	base := fs.String("url", "", "the server's `URL` (e.g. https://corral.example.ts.net), before each console page")
	kind := fs.String("kind", "", "the desktop's `KIND`: vm or ct")
	open := fs.Bool("open", false, "start a client on the target: the browser with --url, else xfreerdp for RDP")
	name, rest := "", args
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		name, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil || name == "" || fs.NArg() > 0 {
		return errors.New(vdiUsage)
	}
	id, err := svc.ResolveDesktopKind(ctx, *kind, name)
	if err != nil {
		return err
	}
	who := auth.Identity{Login: cliActor(), Via: auth.ViaAnonymous, Admin: true}
	if *user != "" {
		who = auth.Identity{Login: *user, Via: auth.ViaOIDC}
	}
	c, err := svc.Connect(ctx, who, id)
	if err != nil {
		return err
	}
	prefix := strings.TrimSuffix(*base, "/")
	fmt.Fprintf(out, "desktop %s (held by %s)\n", c.Desktop, c.Owner)
	target := prefix + c.Target.URL
	fmt.Fprintf(out, "connect: %s: %s\n", strings.ToUpper(c.Target.Protocol), target)
	if c.Target.Address != "" {
		fmt.Fprintf(out, "address: %s\n", c.Target.Address)
	}
	for _, f := range c.Fallbacks {
		fmt.Fprintf(out, "fallback: %s: %s\n", f.Protocol, prefix+f.URL)
	}
	for _, s := range c.Skipped {
		fmt.Fprintf(out, "skipped: %s\n", s)
	}
	if !*open {
		return nil
	}
	argv, manual, err := openCommand(c, *base, os.Getenv, runtime.GOOS)
	if err != nil {
		return err
	}
	if err := launch(argv, manual); err != nil {
		return err
	}
	fmt.Fprintf(out, "opened: %s\n", strings.Join(argv, " "))
	return nil
}
