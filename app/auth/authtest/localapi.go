package authtest

import (
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"tailscale.com/client/tailscale/apitype"
	"tailscale.com/tailcfg"
)

// LocalAPI is a stand-in for tailscaled's LocalAPI on a unix socket: it
// answers GET /localapi/v0/whois?addr=IP:PORT with the
// apitype.WhoIsResponse of a peer added with AddPeer, and 404 for any
// other address, as tailscaled does.
type LocalAPI struct {
	// Socket is the unix socket's path (for CORRAL_TAILSCALE).
	Socket string

	mu    sync.Mutex
	peers map[netip.Addr]apitype.WhoIsResponse
	calls int
}

// NewLocalAPI serves a LocalAPI for the test's lifetime.
func NewLocalAPI(t testing.TB) *LocalAPI {
	t.Helper()
	// Unix socket paths are short (108 bytes): not under t.TempDir().
	dir, err := os.MkdirTemp("", "ts")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l := &LocalAPI{Socket: filepath.Join(dir, "tailscaled.sock"), peers: map[netip.Addr]apitype.WhoIsResponse{}}
	ln, err := net.Listen("unix", l.Socket)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /localapi/v0/whois", l.whois)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return l
}

// AddPeer makes ip a tailnet peer of the user login (display name name),
// or, with tags, a tagged node named name.
func (l *LocalAPI) AddPeer(ip, login, name string, tags ...string) {
	a := netip.MustParseAddr(ip)
	res := apitype.WhoIsResponse{
		Node:        &tailcfg.Node{ID: 1, Name: name + ".tail0000.ts.net.", Addresses: []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}, Tags: tags},
		UserProfile: &tailcfg.UserProfile{ID: 7, LoginName: login, DisplayName: name},
	}
	if len(tags) > 0 {
		res.UserProfile = &tailcfg.UserProfile{ID: 8, LoginName: "tagged-devices", DisplayName: "tagged-devices"}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.peers[a] = res
}

// Calls returns how many WhoIs requests were answered.
func (l *LocalAPI) Calls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

func (l *LocalAPI) whois(w http.ResponseWriter, r *http.Request) {
	ap, err := netip.ParseAddrPort(r.URL.Query().Get("addr"))
	if err != nil {
		http.Error(w, "invalid 'addr' parameter", http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	l.calls++
	res, ok := l.peers[ap.Addr()]
	l.mu.Unlock()
	if !ok {
		http.Error(w, "no match for IP:port", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}
