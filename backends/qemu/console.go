package qemu

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"

	"github.com/corral-dev/corral/backends"
)

// Consoles implements backends.ConsoleDialer: a live VM offers its VNC
// display and its serial port; a stopped one offers nothing until it
// starts. There is no RDP: that is the guest's business, reached through
// its forwarded ports.
func (b *Backend) Consoles(ctx context.Context, ref backends.InstanceRef) ([]backends.ConsoleKind, error) {
	v, err := b.lookup(ref)
	if err != nil {
		return nil, err
	}
	if _, alive := v.process(); !alive {
		return []backends.ConsoleKind{}, nil
	}
	return []backends.ConsoleKind{backends.ConsoleVNC, backends.ConsoleSerial}, nil
}

// DialConsole implements backends.ConsoleDialer. VNC is qemu's RFB server
// and serial the guest's first serial port, both unix sockets in the VM
// folder. qemu serves one serial client at a time: a second connection
// waits until the first closes.
func (b *Backend) DialConsole(ctx context.Context, ref backends.InstanceRef, kind backends.ConsoleKind) (net.Conn, error) {
	v, err := b.lookup(ref)
	if err != nil {
		return nil, err
	}
	var sock string
	switch kind {
	case backends.ConsoleVNC:
		sock = v.vncSock()
	case backends.ConsoleSerial:
		sock = v.serSock()
	case backends.ConsoleRDP:
		return nil, backends.Refuse(backends.KindQEMU, "RDP console", "use the VNC console, or RDP to the guest through a forwarded port")
	default:
		return nil, backends.Invalidf("console kind %q is not accepted: use vnc or serial", kind)
	}
	if _, alive := v.process(); !alive {
		return nil, backends.Conflictf("%s is stopped: start it first", ref.Name)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
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
