package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/user"
	"strings"

	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
)

const vdiUsage = `usage:
  corral vdi pool create NAME --from GOLDEN --size N [--ephemeral]
  corral vdi pool import NAME --from GOLDEN   (a KubeVirt pool of v0.6.0: labels only)
  corral vdi pool list
  corral vdi pool delete POOL
  corral vdi pool resize POOL --size N   (a CT pool: corral vdi ct-pool apply NAME --size N)
  corral vdi assign POOL USER
  corral vdi unassign DESKTOP
  corral vdi ct-pool apply|reconcile|status|list|claim|release|delete ...   (corral vdi ct-pool for details)
  corral vdi connect DESKTOP [--kind vm|ct] [--user LOGIN] [--url BASE] [--open]
POOL is vm/NAMESPACE/NAME or a pool name; DESKTOP is KIND/NAMESPACE/MEMBER or a
member name; GOLDEN is a canonical ref or an instance name.`

// vdiCmd administers VDI pools in the database and on the contexts
// `corral serve` uses, through the same core as the broker.
func vdiCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New(vdiUsage)
	}
	if args[0] == "ct-pool" {
		return ctPoolCmd(ctx, args[1:], out)
	}
	a, err := cliApp(ctx)
	if err != nil {
		return err
	}
	defer a.Close()
	o := tasks.Origin{Actor: cliActor(), Surface: "cli"}
	svc := a.VDI
	switch {
	case args[0] == "pool" && len(args) >= 2 && args[1] == "create":
		fs := flag.NewFlagSet("corral vdi pool create", flag.ContinueOnError)
		from := fs.String("from", "", "clone the golden instance `REF`")
		size := fs.Int("size", 0, "`N` members")
		eph := fs.Bool("ephemeral", false, "a release destroys the member and clones it again")
		name, rest := "", args[2:]
		if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			name, rest = rest[0], rest[1:]
		}
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if name == "" || *from == "" || fs.NArg() > 0 {
			return errors.New(vdiUsage)
		}
		if !strings.Contains(*from, "/") {
			a.Fleet.Refresh(ctx) // a bare name is resolved against the live fleet
		}
		p, err := svc.CreatePool(ctx, o, vdi.PoolRequest{Name: name, Golden: *from, Size: *size, Ephemeral: *eph})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "pool %s created: %d members\n", p.ID, len(p.Members))
		for _, m := range p.Members {
			fmt.Fprintf(out, "  %s\n", m.Desktop)
		}
		return nil
	case args[0] == "pool" && len(args) == 5 && args[1] == "import" && args[3] == "--from":
		if !strings.Contains(args[4], "/") {
			a.Fleet.Refresh(ctx)
		}
		p, err := svc.ImportPool(ctx, o, args[2], args[4])
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "pool %s imported: %d members\n", p.ID, len(p.Members))
		return nil
	case args[0] == "pool" && len(args) == 2 && args[1] == "list":
		pools, err := svc.Pools(ctx)
		if err != nil {
			return err
		}
		for _, p := range pools {
			mode := "persistent"
			if p.Ephemeral {
				mode = "ephemeral"
			}
			fmt.Fprintf(out, "%s  (%s, %d members, from %s)\n", p.ID, mode, len(p.Members), p.Golden)
			for _, m := range p.Members {
				holder := "free"
				if m.Holder != "" {
					holder = m.Holder
					if m.Expired {
						holder += " (expired)"
					}
				}
				fmt.Fprintf(out, "  %-28s %-28s %s\n", m.Desktop, holder, m.State)
			}
		}
		return nil
	case args[0] == "pool" && len(args) == 3 && args[1] == "delete":
		id, err := svc.ResolvePool(ctx, args[2])
		if err != nil {
			return err
		}
		if err := svc.DeletePool(ctx, o, id); err != nil {
			return err
		}
		fmt.Fprintf(out, "pool %s deleted\n", id)
		return nil
	case args[0] == "pool" && len(args) >= 2 && args[1] == "resize":
		return vdiPoolResize(ctx, svc, args[2:], out)
	case args[0] == "assign" && len(args) == 3:
		id, err := svc.ResolvePool(ctx, args[1])
		if err != nil {
			return err
		}
		d, err := svc.Assign(ctx, o, id, args[2])
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "assigned %s → %s\n", d.ID, d.Owner)
		if d.StartError != "" {
			fmt.Fprintf(out, "start failed (the assignment stays; start it again): %s\n", d.StartError)
		}
		return nil
	case args[0] == "connect":
		return vdiConnect(ctx, svc, args[1:], out)
	case args[0] == "unassign" && len(args) == 2:
		// VM pools only: a CT desktop is released with corral vdi
		// ct-pool release.
		id, err := svc.ResolveDesktopKind(ctx, "vm", args[1])
		if err != nil {
			return err
		}
		if err := svc.Unassign(ctx, o, id); err != nil {
			return err
		}
		fmt.Fprintf(out, "unassigned %s\n", id)
		return nil
	}
	return errors.New(vdiUsage)
}

// cliActor names the local user in the audit log.
func cliActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "local:" + u.Username
	}
	return "local"
}
