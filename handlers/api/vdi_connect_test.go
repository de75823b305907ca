package api_test

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/corral-dev/corral/backends/sim"
)

// TestVDIConnectHasNoAddress: the REST connect answer of an RDP target
// whose backend names a loopback address (a native client's, for the
// in-process CLI only) gives the console page and never that address,
// which would skip the RDP proxy's token check.
func TestVDIConnectHasNoAddress(t *testing.T) {
	rdp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdp.Close() })
	go func() {
		for {
			c, err := rdp.Accept()
			if err != nil {
				return
			}
			go func() { // an X.224 connection confirm: the probe's "RDP answers"
				defer c.Close()
				buf := make([]byte, 19)
				if _, err := c.Read(buf); err == nil {
					_, _ = c.Write([]byte{0x03, 0x00, 0x00, 0x13})
				}
			}()
		}
	}()
	srv := vdiServerOn(t, true, sim.NewRDP(sim.Options{Context: "lab", RDPAddr: rdp.Addr().String()}))
	var d desktopJSON
	if code := call(t, srv, http.MethodPost, "/api/vdi/pools/vm/-/desk/claim", "alice@example.com", &d); code != 200 {
		t.Fatalf("claim = %d", code)
	}
	var answer map[string]any
	if code := call(t, srv, http.MethodGet, "/api/vdi/desktops/"+d.ID+"/connect", "alice@example.com", &answer); code != 200 {
		t.Fatalf("connect = %d %v", code, answer)
	}
	target, _ := answer["target"].(map[string]any)
	if target["protocol"] != "rdp" || target["url"] != "/console/sim/lab/-/"+strings.TrimPrefix(d.ID, "vm/-/")+"?kind=rdp" {
		t.Fatalf("connect target = %v, want the RDP console page", target)
	}
	if a, ok := target["address"]; ok {
		t.Fatalf("the connect answer gives the address %v", a)
	}
}
