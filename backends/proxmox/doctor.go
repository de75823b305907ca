package proxmox

import (
	"context"
	"fmt"
	"strings"

	"github.com/corral-dev/corral/backends"
)

// Doctor implements backends.Doctor: the token is accepted (GET /version
// needs a valid one), the version, and every node of the cluster online.
// Messages are Corral's own; the server's text goes to the log.
func (b *Backend) Doctor(ctx context.Context) []backends.Check {
	v, err := b.c.Version(ctx)
	if err != nil {
		err = b.fail("read the version of", b.opts.Context, err)
		b.opts.Logger.Warn("proxmox: doctor", "context", b.opts.Context, "err", err)
		return []backends.Check{{Name: "API token", Message: backends.SafeMessage(err)}}
	}
	checks := []backends.Check{
		{Name: "API token", OK: true, Message: "accepted"},
		{Name: "version", OK: true, Message: "Proxmox VE " + v.Version},
	}
	ns, err := b.c.Nodes(ctx)
	if err != nil {
		err = b.fail("list the nodes of", b.opts.Context, err)
		b.opts.Logger.Warn("proxmox: doctor", "context", b.opts.Context, "err", err)
		return append(checks, backends.Check{Name: "nodes", Message: backends.SafeMessage(err)})
	}
	var down []string
	for _, n := range ns {
		if n.Status != "" && n.Status != "online" {
			down = append(down, n.Node)
		}
	}
	c := backends.Check{Name: "nodes", OK: len(ns) > 0 && len(down) == 0, Message: fmt.Sprintf("%d online", len(ns)-len(down))}
	switch {
	case len(ns) == 0:
		c.Message = "the token sees no node: give it Sys.Audit on /"
	case len(down) > 0:
		c.Message += "; not reachable: " + strings.Join(down, ", ")
	}
	return append(checks, c)
}
