package pve

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/coder/websocket"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/pve"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// qemuVNCProxy is POST .../vncproxy: a grant for one VNC websocket.
// Corral serves only the websocket form; websocket=0 asked for a raw TCP
// port PVE would open, which Corral does not.
func (h *handler) qemuVNCProxy(r *http.Request, p pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	if v, ok := p["websocket"]; ok && !p.Bool("websocket") && v != "" {
		return nil, pve.ParamError("websocket", "Corral serves VNC consoles over vncwebsocket only: send websocket=1")
	}
	return h.Service.VNCProxy(r.Context(), caller(r), param(r, "node"), id, p.Bool("generate-password"))
}

// qemuTermProxy is POST .../termproxy: a grant for the guest's serial
// port over vncwebsocket, in PVE's termproxy protocol.
func (h *handler) qemuTermProxy(r *http.Request, p pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	return h.Service.TermProxy(r.Context(), caller(r), param(r, "node"), id, p["serial"])
}

// acceptOptions: PVE's clients (noVNC, go-proxmox) ask for the "binary"
// subprotocol; VNC data is compressed already.
var acceptOptions = &websocket.AcceptOptions{
	Subprotocols:    []string{"binary"},
	CompressionMode: websocket.CompressionDisabled,
}

// qemuVNCWebsocket is GET .../vncwebsocket?port=&vncticket=: everything
// that can be refused (the ticket, the guest, its display) is refused in
// PVE's error shape before the upgrade; then the viewer answers the VNC
// password challenge and gets the guest's display.
func (h *handler) qemuVNCWebsocket(w http.ResponseWriter, r *http.Request) {
	p, err := params(r)
	var id int64
	if err == nil {
		id, err = vmid(r)
	}
	if err == nil && p["port"] == "" {
		err = pve.ParamError("port", "property is missing and it is not optional")
	}
	if err == nil && p["vncticket"] == "" {
		err = pve.ParamError("vncticket", "property is missing and it is not optional")
	}
	var con *pve.Console
	if err == nil {
		con, err = h.Service.OpenConsole(r.Context(), caller(r), param(r, "node"), id, p["port"], p["vncticket"])
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer con.Close()
	c, err := websocket.Accept(w, r, acceptOptions)
	if err != nil {
		return // Accept has answered
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	viewer := websocket.NetConn(ctx, c, websocket.MessageBinary)
	defer viewer.Close()
	id0 := middleware.IdentityFrom(r.Context())
	if con.Kind == backends.ConsoleSerial {
		h.Audit.Record(r.Context(), id0, "pve", "console serial", con.Ref.String(), "ok", "viewer connected")
		if err := con.ServeTerm(viewer); err != nil && !errors.Is(err, io.EOF) {
			h.Log.Debug("pve: serial console ended", "ref", con.Ref.String(), "err", err)
		}
		return
	}
	if err := con.Greet(viewer); err != nil {
		h.Audit.Record(r.Context(), id0, "pve", "console vnc", con.Ref.String(), auth.OutcomeRefused, "VNC password not accepted")
		return
	}
	h.Audit.Record(r.Context(), id0, "pve", "console vnc", con.Ref.String(), "ok", "viewer connected")
	done := make(chan error, 2)
	go func() { _, err := io.Copy(con.Conn(), viewer); done <- err }()
	go func() { _, err := io.Copy(viewer, con.Conn()); done <- err }()
	if err := <-done; err != nil && !errors.Is(err, io.EOF) {
		h.Log.Debug("pve: vnc console ended", "ref", con.Ref.String(), "err", err)
	}
}
