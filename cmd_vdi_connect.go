package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/vdi"
)

// vdiConnect is `corral vdi connect DESKTOP [--user LOGIN] [--url BASE]`:
// the broker's connect answer (spec/vdi.md, Connect) for a desktop, probed
// now from this machine: the target console page, the fallbacks in order
// and what was skipped and why. Without --user the caller is the local
// admin; with it, LOGIN must hold the desktop. --url prefixes the console
// pages with the server's address.
func vdiConnect(ctx context.Context, svc *vdi.Service, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("corral vdi connect", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	user := fs.String("user", "", "require that `LOGIN` holds the desktop")
	base := fs.String("url", "", "the server's `URL` (e.g. https://corral.example.ts.net), before each console page")
	name, rest := "", args
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		name, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil || name == "" || fs.NArg() > 0 {
		return errors.New(vdiUsage)
	}
	id, err := svc.ResolveDesktop(ctx, name)
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
	fmt.Fprintf(out, "connect: %s: %s\n", strings.ToUpper(c.Target.Protocol), prefix+c.Target.URL)
	for _, f := range c.Fallbacks {
		fmt.Fprintf(out, "fallback: %s: %s\n", f.Protocol, prefix+f.URL)
	}
	for _, s := range c.Skipped {
		fmt.Fprintf(out, "skipped: %s\n", s)
	}
	return nil
}
