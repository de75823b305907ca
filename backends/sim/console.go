package sim

import (
	"context"
	"net"

	"github.com/corral-dev/corral/backends"
)

var _ backends.ConsoleDialer = (*RDP)(nil)

// RDP is a simulated context whose running instances offer one console,
// RDP, reached at Options.RDPAddr: the logic of the RDP console (tokens,
// the console page, the proxy) is tested against a real RDP server behind
// simulated instances. A plain Backend has no consoles, so the dashboard
// of `corral serve --demo` offers none it cannot open.
type RDP struct{ *Backend }

// NewRDP returns a simulated context as New does, with the RDP console.
func NewRDP(opts Options) *RDP { return &RDP{New(opts)} }

// Consoles implements backends.ConsoleDialer: rdp for a running instance
// when RDPAddr is set, nothing otherwise.
func (b *RDP) Consoles(ctx context.Context, ref backends.InstanceRef) ([]backends.ConsoleKind, error) {
	in, err := b.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if in.State != backends.StateRunning || b.opts.RDPAddr == "" {
		return []backends.ConsoleKind{}, nil
	}
	return []backends.ConsoleKind{backends.ConsoleRDP}, nil
}

// DialConsole implements backends.ConsoleDialer: a TCP connection to
// RDPAddr for the RDP console of a running instance.
func (b *RDP) DialConsole(ctx context.Context, ref backends.InstanceRef, kind backends.ConsoleKind) (net.Conn, error) {
	in, err := b.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if kind != backends.ConsoleRDP || b.opts.RDPAddr == "" {
		return nil, backends.Refuse(backends.KindSim, string(kind)+" console", "simulated instances offer an RDP console only, when the context has an RDP address")
	}
	if in.State != backends.StateRunning {
		return nil, backends.Conflictf("%s is %s: start it first", ref.Name, in.State)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", b.opts.RDPAddr)
	if err != nil {
		return nil, backends.Failed("the simulated instance's RDP server did not answer", err)
	}
	return c, nil
}

var _ backends.RDPProber = (*RDP)(nil)

// ProbeRDP implements backends.RDPProber: backends.ProbeRDP at RDPAddr for
// a running instance.
func (b *RDP) ProbeRDP(ctx context.Context, ref backends.InstanceRef) error {
	in, err := b.Get(ctx, ref)
	if err != nil {
		return err
	}
	if in.State != backends.StateRunning {
		return backends.Conflictf("%s is %s: start it first", ref.Name, in.State)
	}
	if b.opts.RDPAddr == "" {
		return backends.Refuse(backends.KindSim, "RDP console", "give the simulated context an RDP address")
	}
	return backends.ProbeRDP(ctx, b.opts.RDPAddr, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", b.opts.RDPAddr)
	})
}

var _ backends.RDPAddresser = (*RDP)(nil)

// RDPAddress implements backends.RDPAddresser: RDPAddr, for a running
// instance.
func (b *RDP) RDPAddress(ctx context.Context, ref backends.InstanceRef) (string, error) {
	in, err := b.Get(ctx, ref)
	if err != nil {
		return "", err
	}
	if in.State != backends.StateRunning || b.opts.RDPAddr == "" {
		return "", backends.Conflictf("%s offers no RDP console now", ref.Name)
	}
	return b.opts.RDPAddr, nil
}
