package qemu

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/backends"
)

// Consoles implements backends.ConsoleDialer: a live VM offers its VNC
// display and its serial port, and RDP when its current boot forwards a
// loopback port to the guest's 3389 (rdp.port); a stopped VM offers
// nothing until it starts. Whether the guest's RDP service answers behind
// the forward is not asked here: a probe costs up to
// backends.RDPProbeTimeout for a guest without RDP (qemu accepts on the
// forward before it knows the guest does not), and every VM page asks for
// the list. The places where the answer matters probe (ProbeRDP): the RDP
// token of the console page and the VDI connect answer.
func (b *Backend) Consoles(ctx context.Context, ref backends.InstanceRef) ([]backends.ConsoleKind, error) {
	v, err := b.lookup(ref)
	if err != nil {
		return nil, err
	}
	if _, alive := v.process(); !alive {
		return []backends.ConsoleKind{}, nil
	}
	kinds := []backends.ConsoleKind{backends.ConsoleVNC, backends.ConsoleSerial}
	if _, err := v.rdpAddr(); err == nil {
		kinds = append(kinds, backends.ConsoleRDP)
	}
	return kinds, nil
}

// ProbeRDP implements backends.RDPProber: whether RDP answers on ref's
// forwarded port 3389 (see backends.ProbeRDP), with a reason safe to show
// when it does not.
func (b *Backend) ProbeRDP(ctx context.Context, ref backends.InstanceRef) error {
	v, err := b.lookup(ref)
	if err != nil {
		return err
	}
	if _, alive := v.process(); !alive {
		return backends.Conflictf("%s is stopped: start it first", ref.Name)
	}
	addr, err := v.rdpAddr()
	if err != nil {
		return backends.Conflictf("%s was started without an RDP forward: restart it", ref.Name)
	}
	return backends.ProbeRDP(ctx, addr+" (the guest's 3389)", func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	})
}

// rdpAddr is the loopback address forwarded to the guest's port 3389 by
// the current boot, from rdp.port.
func (v *vm) rdpAddr() (string, error) {
	data, err := os.ReadFile(v.rdpPortFile())
	if err != nil {
		return "", err
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || port <= 0 || port > 65535 {
		return "", errors.New("qemu: rdp.port holds no port")
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// rdpPortFile records the host port of the current boot's RDP forward.
func (v *vm) rdpPortFile() string { return filepath.Join(v.dir, "rdp.port") }

// DialConsole implements backends.ConsoleDialer. VNC is qemu's RFB server
// and serial the guest's first serial port, both unix sockets in the VM
// folder; qemu serves one serial client at a time: a second connection
// waits until the first closes. RDP is a TCP connection to the loopback
// forward of the guest's port 3389: what answers there is the guest's.
func (b *Backend) DialConsole(ctx context.Context, ref backends.InstanceRef, kind backends.ConsoleKind) (net.Conn, error) {
	v, err := b.lookup(ref)
	if err != nil {
		return nil, err
	}
	network, addr := "unix", ""
	switch kind {
	case backends.ConsoleVNC:
		addr = v.vncSock()
	case backends.ConsoleSerial:
		addr = v.serSock()
	case backends.ConsoleRDP:
		network = "tcp"
	default:
		return nil, backends.Invalidf("console kind %q is not accepted: use vnc, serial or rdp", kind)
	}
	if _, alive := v.process(); !alive {
		return nil, backends.Conflictf("%s is stopped: start it first", ref.Name)
	}
	if kind == backends.ConsoleRDP {
		if addr, err = v.rdpAddr(); err != nil {
			return nil, backends.Conflictf("%s was started without an RDP forward: restart it", ref.Name)
		}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, b.fail("open the "+string(kind)+" console of", ref.Name, err)
	}
	return c, nil
}

// SerialScrollback implements backends.Scrollback: the last limit bytes of
// the current boot's serial.log, so a viewer who connects late sees what the
// guest printed before. A VM that never ran has an empty log.
func (b *Backend) SerialScrollback(ctx context.Context, ref backends.InstanceRef, limit int) ([]byte, error) {
	v, err := b.lookup(ref)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(v.serLog())
	if errors.Is(err, fs.ErrNotExist) {
		return []byte{}, nil
	}
	if err != nil {
		return nil, backends.Failed("qemu could not read the serial log of "+ref.Name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, backends.Failed("qemu could not read the serial log of "+ref.Name, err)
	}
	off := max(0, fi.Size()-int64(limit))
	buf := make([]byte, fi.Size()-off)
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, backends.Failed("qemu could not read the serial log of "+ref.Name, err)
	}
	return buf[:n], nil
}
