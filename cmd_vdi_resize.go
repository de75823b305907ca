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
	"github.com/corral-dev/corral/backends"
)

// vdiPoolResize is `corral vdi pool resize POOL --size N`: the VM pool
// grows by clones or shrinks by its unclaimed members (vdi.ResizePool),
// before the command returns. A CT pool's size is its definition's
// (corral vdi ct-pool apply NAME --size N).
func vdiPoolResize(ctx context.Context, svc *vdi.Service, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("corral vdi pool resize", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	size := fs.Int("size", 0, "the pool's new size, `N` members")
	name, rest := "", args
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		name, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil || name == "" || fs.NArg() > 0 {
		return errors.New(vdiUsage)
	}
	id, err := svc.ResolvePool(ctx, name)
	if errors.Is(err, backends.ErrNotFound) {
		return fmt.Errorf("%w (a CT pool is resized with corral vdi ct-pool apply %s --size N)", err, name)
	}
	if err != nil {
		return err
	}
	who := auth.Identity{Login: cliActor(), Via: auth.ViaAnonymous, Admin: true}
	r, err := svc.ResizePool(ctx, who, "cli", id, *size)
	for _, d := range r.Added {
		fmt.Fprintf(out, "  added %s\n", d)
	}
	for _, d := range r.Removed {
		fmt.Fprintf(out, "  removed %s\n", d)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "pool %s: %d members (was %d)\n", r.Pool, r.To, r.From)
	return nil
}
