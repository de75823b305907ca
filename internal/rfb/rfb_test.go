package rfb_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/rfb"
)

// TestClientAgainstQEMU checks the VNC Authentication response against
// another implementation: QEMU's VNC server with a password set over QMP.
// A bug in the key's bit order or the DES mode would pass a test of this
// package against itself and fail here.
func TestClientAgainstQEMU(t *testing.T) {
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		if os.Getenv("CORRAL_REQUIRE_ENGINES") == "1" {
			t.Fatalf("engine: qemu-system-x86_64 not found: %v", err)
		}
		t.Skipf("engine: qemu-system-x86_64 not found: %v", err)
	}
	dir := t.TempDir()
	vnc, qmp := filepath.Join(dir, "vnc.sock"), filepath.Join(dir, "qmp.sock")
	cmd := exec.Command(bin, "-machine", "none", "-nodefaults", "-display", "none",
		"-vnc", "unix:"+vnc+",password=on", "-qmp", "unix:"+qmp+",server=on,wait=off")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var q net.Conn
	for deadline := time.Now().Add(20 * time.Second); ; {
		if q, err = net.Dial("unix", qmp); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("QMP socket: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer q.Close()
	_ = q.SetDeadline(time.Now().Add(20 * time.Second))
	rd := bufio.NewReader(q)
	qmpCall := func(cmd map[string]any) {
		t.Helper()
		b, _ := json.Marshal(cmd)
		if _, err := q.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("QMP %v: %v", cmd, err)
			}
			if strings.Contains(line, `"return"`) {
				return
			}
			if strings.Contains(line, `"error"`) {
				t.Fatalf("QMP %v: %s", cmd, line)
			}
		}
	}
	if _, err := rd.ReadString('\n'); err != nil { // the greeting
		t.Fatal(err)
	}
	qmpCall(map[string]any{"execute": "qmp_capabilities"})
	const password = "PVEVNC:6" // what a PVE ticket's first 8 bytes look like
	qmpCall(map[string]any{"execute": "set_password", "arguments": map[string]any{"protocol": "vnc", "password": password}})

	dial := func() net.Conn {
		c, err := net.Dial("unix", vnc)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		t.Cleanup(func() { c.Close() })
		return c
	}
	if err := rfb.ClientHandshake(dial(), password+"-the rest of the ticket"); err != nil {
		t.Fatalf("QEMU refused the right password: %v", err)
	}
	if err := rfb.ClientHandshake(dial(), "PVEVNC:7"); !errors.Is(err, rfb.ErrAuth) {
		t.Fatalf("a wrong password: %v; want ErrAuth", err)
	}
}

// TestServerHandshake: the server side accepts the client side's answer
// for the right password only, and None needs none.
func TestServerHandshake(t *testing.T) {
	for _, tc := range []struct {
		name, server, client string
		none                 bool
		wantErr              error
	}{
		{name: "vnc auth", server: "PVEVNC:ABCD::sig", client: "PVEVNC:ABCD::sig"},
		{name: "wrong password", server: "secret", client: "other", wantErr: rfb.ErrAuth},
		{name: "none", none: true, client: "unused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			check := rfb.Verify(tc.server)
			if tc.none {
				check = nil
			}
			srv := make(chan error, 1)
			go func() { srv <- rfb.ServerHandshake(a, check, "no") }()
			cerr := rfb.ClientHandshake(b, tc.client)
			serr := <-srv
			if !errors.Is(cerr, tc.wantErr) || !errors.Is(serr, tc.wantErr) {
				t.Fatalf("client %v, server %v; want %v", cerr, serr, tc.wantErr)
			}
		})
	}
}
