package vdi

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/backends"
)

// Connect protocols, in the order spec/vdi.md ranks them.
const (
	ProtoRDP      = "rdp"
	ProtoVNC      = "vnc"
	ProtoSerial   = "serial"
	ProtoTerminal = "terminal"
)

// ConnectOption is one way into a desktop: a protocol and the console
// page that opens it in the browser.
type ConnectOption struct {
	Protocol string `json:"protocol"`
	// Kind is the console page's kind (vnc, serial, rdp).
	Kind string `json:"kind"`
	URL  string `json:"url"`
	// Address is host:port of an RDP target that a native client on the
	// server's machine reaches (qemu's forward), when the backend says.
	// Only the in-process CLI (corral vdi connect --open) uses it: it is
	// never in a REST answer, where it would let a holder past the RDP
	// proxy's token check.
	Address string `json:"-"`
}

// ConnectAnswer is the target of a desktop and its fallbacks, in the
// spec's order, with the reason for every protocol it skipped.
type ConnectAnswer struct {
	Desktop   string          `json:"desktop"`
	Owner     string          `json:"owner"`
	Ref       string          `json:"ref"`
	Target    ConnectOption   `json:"target"`
	Fallbacks []ConnectOption `json:"fallbacks"`
	Skipped   []string        `json:"skipped"`
}

// ConsoleURL is the console page of ref for kind.
func ConsoleURL(ref backends.InstanceRef, kind backends.ConsoleKind) string {
	return "/console/" + ref.String() + "?kind=" + string(kind)
}

// Connect answers how the holder (or an admin) connects to a desktop,
// probed now: a CT offers its terminal; a VM offers RDP when TCP 3389
// answers, else VNC when it has a screen, and its serial console last. A
// desktop without a claim is NotFound, an expired claim or a stopped
// desktop a Conflict that names the action to take first.
func (s *Service) Connect(ctx context.Context, who auth.Identity, desktop string) (ConnectAnswer, error) {
	if isCT(desktop) {
		return s.connectCT(ctx, who, desktop)
	}
	p, c, err := s.held(ctx, who, desktop)
	if err != nil {
		return ConnectAnswer{}, err
	}
	if c.Expired(s.now()) {
		return ConnectAnswer{}, backends.Conflictf("the claim on %s expired: claim the pool %s again", c.Desktop, p.id)
	}
	_, ref, _ := p.member(c.Desktop)
	cctx, cancel := s.opts.Fleet.CallContext(ctx)
	defer cancel()
	in, err := p.b.Get(cctx, ref)
	if err != nil {
		return ConnectAnswer{}, err
	}
	if in.State != backends.StateRunning {
		return ConnectAnswer{}, backends.Conflictf("desktop %s is %s: start it first", c.Desktop, in.State)
	}
	dialer, err := backends.Consoles(p.b)
	if err != nil {
		return ConnectAnswer{}, err
	}
	out := ConnectAnswer{Desktop: c.Desktop.String(), Owner: c.Holder, Ref: ref.String(), Skipped: []string{}, Fallbacks: []ConnectOption{}}
	var opts []ConnectOption
	if in.Type == backends.TypeCT { // a VM pool of CTs (e.g. Proxmox LXC clones)
		offered, err := backends.ConsolesOf(cctx, dialer, in)
		if err != nil {
			return ConnectAnswer{}, err
		}
		if !slices.Contains(offered, backends.ConsoleSerial) {
			return ConnectAnswer{}, backends.Conflictf("desktop %s offers no terminal now: start it again", c.Desktop)
		}
		opts = append(opts, ConnectOption{Protocol: ProtoTerminal, Kind: string(backends.ConsoleSerial), URL: ConsoleURL(ref, backends.ConsoleSerial)})
	} else {
		// The console list does not dial (a backend lists RDP from its
		// configuration); the probe asks whether RDP answers, and runs
		// beside the list, which may read the backend.
		var wg sync.WaitGroup
		var rdpErr error
		prober, canProbe := dialer.(backends.RDPProber)
		if canProbe {
			wg.Go(func() { rdpErr = prober.ProbeRDP(cctx, ref) })
		}
		offered, err := backends.ConsolesOf(cctx, dialer, in)
		wg.Wait()
		if err != nil {
			return ConnectAnswer{}, err
		}
		switch {
		case canProbe && rdpErr == nil, !canProbe && slices.Contains(offered, backends.ConsoleRDP):
			o := ConnectOption{Protocol: ProtoRDP, Kind: string(backends.ConsoleRDP), URL: ConsoleURL(ref, backends.ConsoleRDP)}
			if a, ok := dialer.(backends.RDPAddresser); ok {
				o.Address, _ = a.RDPAddress(cctx, ref) // none: --open offers the browser only
			}
			opts = append(opts, o)
		case canProbe:
			out.Skipped = append(out.Skipped, "rdp: "+backends.ProbeReason(rdpErr))
		default:
			out.Skipped = append(out.Skipped, "rdp: the "+string(ref.Backend)+" backend offers no RDP console for it")
		}
		if slices.Contains(offered, backends.ConsoleVNC) {
			opts = append(opts, ConnectOption{Protocol: ProtoVNC, Kind: string(backends.ConsoleVNC), URL: ConsoleURL(ref, backends.ConsoleVNC)})
		} else {
			out.Skipped = append(out.Skipped, "vnc: the VM has no graphics device")
		}
		if slices.Contains(offered, backends.ConsoleSerial) {
			opts = append(opts, ConnectOption{Protocol: ProtoSerial, Kind: string(backends.ConsoleSerial), URL: ConsoleURL(ref, backends.ConsoleSerial)})
		} else {
			out.Skipped = append(out.Skipped, "serial: the VM has no serial console")
		}
	}
	if len(opts) == 0 {
		return ConnectAnswer{}, backends.Conflictf("desktop %s offers no console now (%s): start it again", c.Desktop, strings.Join(out.Skipped, "; "))
	}
	out.Target, out.Fallbacks = opts[0], append(out.Fallbacks, opts[1:]...)
	return out, nil
}

// ConsoleAccess decides whether who may open a console of instance ref
// (spec/vdi.md, private consoles): an admin always; a desktop's holder
// only its own claimed desktop (holder reports that case, for the audit);
// everyone else nothing. Callers that are not admins reach it only from
// the console routes of a broker, whose rule lets signed-in persons
// through to this check.
func (s *Service) ConsoleAccess(ctx context.Context, who auth.Identity, ref backends.InstanceRef) (holder bool, err error) {
	if who.Admin {
		return false, nil
	}
	refuse := backends.Forbiddenf("only admins may open the consoles of %s; a desktop's holder may open its own", ref.Name)
	if who.Login == "" || Reserved(who.Login) {
		return false, refuse
	}
	// The same lookup as the session count: a VM pool member by its
	// registered ref, a CT pool member through the CT seam.
	d, ok := s.desktopOf(ref)
	if !ok {
		return false, refuse
	}
	claims, err := s.claimsOf(ctx, d)
	if err != nil {
		return false, refuse
	}
	c, err := claims.Get(ctx, d)
	switch {
	case errors.Is(err, ErrNoClaim):
		return false, refuse
	case err != nil:
		return false, err
	case c.Holder != who.Login:
		return false, backends.Forbiddenf("desktop %s is not yours: only its holder and admins may open its consoles", d)
	case c.Expired(s.now()):
		return false, backends.Conflictf("your claim on %s expired: claim the pool %s again", d, PoolID{Kind: d.Kind, Namespace: d.Namespace, Pool: c.Pool})
	}
	s.rememberLookup(ref, d, claims)
	return true, nil
}
