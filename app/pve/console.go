package pve

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/internal/rfb"
)

// VNC consoles follow PVE's two calls. POST .../vncproxy issues a grant:
// a "port" (in PVE the port of a one-shot proxy; here a handle of the
// grant, 5900-5999) and a ticket "PVEVNC:HEXTIME::SIG" signed over the
// caller's PVE user id (with the token id for a token), the guest's path
// /vms/VMID, its node and the port. GET .../vncwebsocket?port=&vncticket=
// verifies the ticket against the caller of that request, consumes the
// grant (single use, like PVE's proxy, which accepts one connection) and
// bridges the guest's display. Grants live VNCTicketLifetime.
//
// As in PVE the ticket is also the VNC password: Corral stands in front
// of the guest's RFB server, offers VNC Authentication (DES challenge)
// and accepts the response computed from the ticket (or from the
// generated password of generate-password=1), then hands the session over
// to the guest, with which it has already agreed on security type None.

// VNCTicketLifetime is how long a VNC grant can be used: PVE accepts its
// VNC tickets for 40 seconds.
const VNCTicketLifetime = 40 * time.Second

// vncPorts is the range grants are numbered in, PVE's VNC port range.
const vncPortFirst, vncPorts = 5900, 100

// msgBadVNCTicket is PVE's answer for a VNC ticket that does not verify.
const msgBadVNCTicket = "permission denied - invalid PVEVNC ticket"

// grant is one issued console, waiting for its websocket.
type grant struct {
	kind     backends.ConsoleKind // vnc (vncproxy) or serial (termproxy)
	user     string               // PVE user id of the caller, "root@pam!tf" for a token
	node     string
	vmid     int64
	ticket   string
	password string // the VNC password: the ticket, or a generated one
	expires  time.Time
}

// grants are the VNC grants not yet used, by port.
type grants struct {
	mu   sync.Mutex
	byID map[int]grant
	next int
}

// VNCProxy is the answer of POST .../vncproxy. PVE sends the port as a
// string; password only with generate-password=1. Cert is PVE's node
// certificate (PEM), which noVNC's PVE page does not need; Corral does
// not terminate TLS itself, so it is empty.
type VNCProxy struct {
	Cert     string `json:"cert"`
	Port     string `json:"port"`
	Ticket   string `json:"ticket"`
	UPID     string `json:"upid"`
	User     string `json:"user"`
	Password string `json:"password,omitempty"`
}

// VNCProxy issues a VNC grant for guest vmid of node to the caller, as a
// task (so it is audited and has a UPID). The guest must be running and
// its backend able to dial its display.
func (s *Service) VNCProxy(ctx context.Context, c Caller, node string, vmid int64, generatePassword bool) (VNCProxy, error) {
	return s.proxy(ctx, c, node, vmid, backends.ConsoleVNC, generatePassword)
}

// TermProxy issues a grant for the guest's first serial port, PVE's
// termproxy (serial=serial0); the websocket then speaks PVE's termproxy
// protocol (term.go).
func (s *Service) TermProxy(ctx context.Context, c Caller, node string, vmid int64, serial string) (VNCProxy, error) {
	if serial != "" && serial != "serial0" {
		return VNCProxy{}, ParamError("serial", "Corral offers the first serial port only: serial0")
	}
	return s.proxy(ctx, c, node, vmid, backends.ConsoleSerial, false)
}

func (s *Service) proxy(ctx context.Context, c Caller, node string, vmid int64, kind backends.ConsoleKind, generatePassword bool) (VNCProxy, error) {
	g, err := s.Guest(ctx, node, vmid)
	if err != nil {
		return VNCProxy{}, err
	}
	ref := g.In.Ref
	action := map[backends.ConsoleKind]string{backends.ConsoleVNC: "vncproxy", backends.ConsoleSerial: "termproxy"}[kind]
	spec := tasks.Spec{Action: "pve " + action, Target: ref.String(), Origin: c.origin()}
	b, err := s.Fleet.Backend(ref)
	var d backends.ConsoleDialer
	if err == nil {
		d, err = backends.Consoles(b)
	}
	if err != nil {
		return VNCProxy{}, s.Tasks.Refused(ctx, spec, err)
	}
	if pveStatus(g.In.State) != "running" {
		return VNCProxy{}, s.Tasks.Refused(ctx, spec, &Error{Status: 500, Msg: fmt.Sprintf("VM %d not running", vmid)})
	}
	kinds, err := backends.ConsolesOf(ctx, d, g.In)
	if err != nil {
		return VNCProxy{}, s.Tasks.Refused(ctx, spec, err)
	}
	if !slices.Contains(kinds, kind) {
		return VNCProxy{}, s.Tasks.Refused(ctx, spec, backends.Refuse(ref.Backend, string(kind)+" console", "use one of the consoles it offers: "+fmt.Sprint(kinds)))
	}
	now := s.Now()
	gr := grant{kind: kind, user: c.PVEUser, node: node, vmid: vmid, expires: now.Add(VNCTicketLifetime)}
	port, err := s.vnc.add(now, gr)
	if err != nil {
		return VNCProxy{}, s.Tasks.Refused(ctx, spec, err)
	}
	gr.ticket = s.vncTicket(gr, port, now)
	gr.password = gr.ticket
	out := VNCProxy{Port: strconv.Itoa(port), Ticket: gr.ticket, User: c.PVEUser}
	if generatePassword {
		gr.password = randomPassword()
		out.Password = gr.password
	}
	s.vnc.set(port, gr)
	t, err := s.Tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		r.Logf("%s console of VM %d granted to %s (port %d, valid %s, single use)", kind, vmid, c.PVEUser, port, VNCTicketLifetime)
		return nil
	})
	if err != nil {
		s.vnc.take(port)
		return VNCProxy{}, err
	}
	out.UPID = s.UPID(Op{Task: t, Node: node, Type: "vncproxy", VMID: vmid, User: c.PVEUser})
	return out, nil
}

// vncTicket signs what the ticket is bound to; none of it but the time
// is in the ticket's text, as in PVE.
func (s *Service) vncTicket(g grant, port int, at time.Time) string {
	plain := fmt.Sprintf("PVEVNC:%08X", at.Unix())
	return plain + "::" + s.mac("vncticket", plain, g.user, "/vms/"+strconv.FormatInt(g.vmid, 10), g.node, strconv.Itoa(port))
}

func randomPassword() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// add reserves a free port for g, dropping expired grants first.
func (gs *grants) add(now time.Time, g grant) (int, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.byID == nil {
		gs.byID = map[int]grant{}
	}
	for p, x := range gs.byID {
		if now.After(x.expires) {
			delete(gs.byID, p)
		}
	}
	for range vncPorts {
		p := vncPortFirst + gs.next
		gs.next = (gs.next + 1) % vncPorts
		if _, used := gs.byID[p]; !used {
			gs.byID[p] = g
			return p, nil
		}
	}
	return 0, &Error{Status: 500, Msg: "unable to find free port (5900-5999): too many VNC consoles requested in the last 40 seconds"}
}

func (gs *grants) set(port int, g grant) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.byID[port] = g
}

func (gs *grants) take(port int) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	delete(gs.byID, port)
}

// claim verifies ticket for the grant of port and the caller, and
// consumes the grant when it verifies.
func (s *Service) claim(c Caller, node string, vmid int64, port int, ticket string) (grant, error) {
	deny := &Error{Status: 401, Msg: msgBadVNCTicket}
	s.vnc.mu.Lock()
	defer s.vnc.mu.Unlock()
	g, ok := s.vnc.byID[port]
	if !ok {
		return grant{}, deny
	}
	plain, _, _ := strings.Cut(ticket, "::")
	ts, err := strconv.ParseInt(strings.TrimPrefix(plain, "PVEVNC:"), 16, 64)
	if err != nil || !strings.HasPrefix(plain, "PVEVNC:") {
		return grant{}, deny
	}
	want := s.vncTicket(grant{user: c.PVEUser, node: node, vmid: vmid}, port, time.Unix(ts, 0))
	if !hmac.Equal([]byte(want), []byte(ticket)) || ticket != g.ticket {
		return grant{}, deny
	}
	if s.Now().After(g.expires) {
		delete(s.vnc.byID, port)
		return grant{}, deny
	}
	delete(s.vnc.byID, port)
	return g, nil
}

// Console is a guest console opened for a websocket. For VNC, the
// guest's RFB stream, already past its own security handshake, and the
// password the viewer must answer the challenge with; for serial, the
// serial port and the ticket termproxy's first line must carry.
type Console struct {
	Ref      backends.InstanceRef
	Kind     backends.ConsoleKind
	conn     net.Conn
	cancel   context.CancelFunc
	user     string
	ticket   string
	password string
}

// OpenConsole consumes the grant of port after verifying ticket (401 in
// PVE's words otherwise, also for a grant used before, expired, issued
// to another caller or for another guest) and opens the guest's display
// or serial port, as the grant says. ctx bounds the console's life;
// Close ends it.
func (s *Service) OpenConsole(ctx context.Context, c Caller, node string, vmid int64, port, ticket string) (*Console, error) {
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, ParamError("port", "type check ('integer') failed - got '"+port+"'")
	}
	gr, err := s.claim(c, node, vmid, p, ticket)
	if err != nil {
		return nil, err
	}
	g, err := s.Guest(ctx, node, vmid)
	if err != nil {
		return nil, err
	}
	b, err := s.Fleet.Backend(g.In.Ref)
	if err != nil {
		return nil, err
	}
	d, err := backends.Consoles(b)
	if err != nil {
		return nil, err
	}
	conn, cancel, err := backends.DialConsole(ctx, d, g.In.Ref, gr.kind)
	if err != nil {
		return nil, err
	}
	con := &Console{Ref: g.In.Ref, Kind: gr.kind, conn: conn, cancel: cancel, user: gr.user, ticket: gr.ticket, password: gr.password}
	if gr.kind != backends.ConsoleVNC {
		return con, nil
	}
	clear := rfb.Deadline(conn, backends.ConsoleDialTimeout)
	if err := rfb.ClientHandshake(conn, ""); err != nil {
		con.Close()
		return nil, backends.Failed("the display of "+g.In.Ref.Name+" did not complete the VNC handshake", err)
	}
	clear()
	return con, nil
}

// Greet performs the server's side of the handshake with the viewer on
// viewer: VNC Authentication with the grant's password. It returns
// rfb.ErrAuth for a wrong response; after a nil return, copy bytes
// between viewer and Conn.
func (v *Console) Greet(viewer net.Conn) error {
	clear := rfb.Deadline(viewer, backends.ConsoleDialTimeout)
	defer clear()
	return rfb.ServerHandshake(viewer, rfb.Verify(v.password), "invalid VNC password (the PVEVNC ticket)")
}

// Conn is the guest's console: for VNC its RFB stream, standing at
// ClientInit.
func (v *Console) Conn() net.Conn { return v.conn }

// Close ends the console.
func (v *Console) Close() error {
	v.cancel()
	return v.conn.Close()
}
