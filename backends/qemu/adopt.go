package qemu

import (
	"context"
	"os"
	"path/filepath"
	"time"
)

// adopt walks Dir once at construction. Nothing needs loading, since every
// call reads the folders afresh; what adoption does is tidy and tell: a VM
// whose qemu died with Corral away (host reboot, OOM kill) leaves a pid
// file and sockets that would mislead a console bridge, and the log names
// the VMs found still running, so an operator sees that a restart of
// Corral lost nothing.
func (b *Backend) adopt(ctx context.Context) {
	ents, err := os.ReadDir(b.opts.Dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || validName("instance", e.Name()) != nil {
			continue
		}
		v, err := b.lookup(b.ref(e.Name()))
		if err != nil {
			continue
		}
		if _, alive := v.process(); !alive {
			b.cleanup(v)
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st := b.state(sctx, v)
		cancel()
		b.opts.Logger.Info("qemu: adopted a running VM", "vm", v.cfg.Name, "state", st)
	}
	// Leftovers of exports interrupted by a crash. Only old ones: another
	// Corral on the same Dir may be streaming a fresh one right now.
	if tmps, err := filepath.Glob(filepath.Join(b.opts.Dir, ".export-*")); err == nil {
		for _, t := range tmps {
			if st, err := os.Stat(t); err == nil && time.Since(st.ModTime()) > 24*time.Hour {
				_ = os.Remove(t)
			}
		}
	}
}
