package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestVNCBridgeCopiesBothWaysOneConnectionPerViewer(t *testing.T) {
	g := newRig(t, rigOptions{})
	a := g.mustDial(t, "/ws/vnc/"+refVM)
	expect(t, a, "RFB 003.008\n") // backend -> browser
	send(t, a, "key-a")
	expect(t, a, "key-a") // browser -> backend -> browser

	b := g.mustDial(t, "/ws/vnc/"+refVM)
	expect(t, b, "RFB 003.008\n")
	if open, total := g.vnc.open(); open != 2 || total != 2 {
		t.Fatalf("backend connections: %d open, %d in all; want one per viewer", open, total)
	}
	send(t, b, "key-b")
	expect(t, b, "key-b")

	// One viewer leaving closes its own connection only.
	if err := a.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatalf("close: %v", err)
	}
	eventually(t, "the first viewer's backend connection closes", func() bool { open, _ := g.vnc.open(); return open == 1 })
	send(t, b, "still-here")
	expect(t, b, "still-here")
}

func TestVNCBackendDropClosesViewerWithReason(t *testing.T) {
	g := newRig(t, rigOptions{})
	c := g.mustDial(t, "/ws/vnc/"+refVM)
	expect(t, c, "RFB")
	g.vnc.dropAll()
	ce := closed(t, c)
	if ce.Code != websocket.StatusGoingAway || ce.Reason == "" {
		t.Fatalf("close frame %d %q; want 1001 with a reason", ce.Code, ce.Reason)
	}
}

func TestRefusedBeforeUpgrade(t *testing.T) {
	g := newRig(t, rigOptions{})
	host := strings.TrimPrefix(g.srv.URL, "http://")
	for _, tc := range []struct {
		name, path, origin string
		status             int
	}{
		{"cross-origin vnc", "/ws/vnc/" + refVM, "http://evil.example", http.StatusForbidden},
		{"cross-origin serial", "/ws/serial/" + refVM, "https://evil.example", http.StatusForbidden},
		{"origin with another port", "/ws/serial/" + refVM, "http://" + strings.Split(host, ":")[0] + ":1", http.StatusForbidden},
		{"backend without consoles", "/ws/vnc/" + refPlain, "", http.StatusBadRequest},
		{"backend without consoles, serial", "/ws/serial/" + refPlain, "", http.StatusBadRequest},
		{"unknown context", "/ws/vnc/sim/nowhere/-/vm", "", http.StatusNotFound},
		{"unknown instance", "/ws/serial/sim/cons/-/ghost", "", http.StatusNotFound},
		{"unknown bare name", "/ws/vnc/ghost", "", http.StatusNotFound},
		{"not a ref", "/ws/vnc/sim/cons/vm", "", http.StatusNotFound},
		{"stopped vnc", "/ws/vnc/" + refOff, "", http.StatusConflict},
		{"stopped serial", "/ws/serial/" + refOff, "", http.StatusConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			h := http.Header{}
			if tc.origin != "" {
				h.Set("Origin", tc.origin)
			}
			c, res, err := g.dial(ctx, tc.path, h)
			if err == nil {
				c.CloseNow()
				t.Fatal("upgraded; want a refusal")
			}
			if res == nil || res.StatusCode != tc.status {
				t.Fatalf("response %v (%v); want status %d", res, err, tc.status)
			}
		})
	}
	if open, total := g.vnc.open(); total != 0 || open != 0 {
		t.Errorf("a refused request dialed the VNC console (%d connections)", total)
	}
	if n := g.serial.clients(); n != 0 {
		t.Errorf("a refused request dialed the serial console (%d connections)", n)
	}

	// The same origin is accepted.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := g.dial(ctx, "/ws/vnc/"+refVM, http.Header{"Origin": {g.srv.URL}})
	if err != nil {
		t.Fatalf("same-origin upgrade: %v", err)
	}
	c.CloseNow()
}

func TestAuthorizeGuardsEveryRoute(t *testing.T) {
	deny := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "admins only", http.StatusForbidden)
		})
	}
	g := newRig(t, rigOptions{authorize: deny})
	for _, p := range []string{"/ws/vnc/" + refVM, "/ws/serial/" + refVM} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, res, err := g.dial(ctx, p, nil)
		cancel()
		if err == nil {
			c.CloseNow()
			t.Fatalf("%s: upgraded for a caller Authorize refused", p)
		}
		if res == nil || res.StatusCode != http.StatusForbidden {
			t.Fatalf("%s: %v; want 403", p, res)
		}
	}
	res, err := http.Get(g.srv.URL + "/console/" + refVM)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("console page: %d; want 403", res.StatusCode)
	}
	if _, total := g.vnc.open(); total != 0 || g.serial.clients() != 0 {
		t.Error("a refused caller reached a console")
	}
}
