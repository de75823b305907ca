package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/vdi"
)

// TestOpenCommand: the command line --open starts, for each kind of
// target, with and without --url and $BROWSER.
func TestOpenCommand(t *testing.T) {
	rdp := vdi.ConnectAnswer{Desktop: "vm/-/desk-1", Target: vdi.ConnectOption{Protocol: vdi.ProtoRDP, Kind: "rdp",
		URL: "/console/qemu/local/-/desk-1?kind=rdp", Address: "127.0.0.1:40001"}}
	rdpNoAddr := rdp
	rdpNoAddr.Target.Address = ""
	vnc := vdi.ConnectAnswer{Desktop: "vm/-/desk-1", Target: vdi.ConnectOption{Protocol: vdi.ProtoVNC, Kind: "vnc", URL: "/console/qemu/local/-/desk-1?kind=vnc"}}
	term := vdi.ConnectAnswer{Desktop: "ct/ns/desk-1", Target: vdi.ConnectOption{Protocol: vdi.ProtoTerminal, Kind: "serial", URL: "/console/kubevirt/c/ns/desk-1?kind=serial"}}
	for _, tc := range []struct {
		name, base, browser, goos string
		c                         vdi.ConnectAnswer
		want                      []string
		manual                    string // what to open by hand
		err                       string
	}{
		{"rdp without --url: xfreerdp", "", "", "linux", rdp, []string{"xfreerdp", "/v:127.0.0.1:40001"}, "127.0.0.1:40001", ""},
		{"rdp with --url: the browser", "https://c.test/", "", "linux", rdp, []string{"xdg-open", "https://c.test/console/qemu/local/-/desk-1?kind=rdp"},
			"https://c.test/console/qemu/local/-/desk-1?kind=rdp", ""},
		{"vnc with --url on macOS", "https://c.test", "", "darwin", vnc, []string{"open", "https://c.test/console/qemu/local/-/desk-1?kind=vnc"},
			"https://c.test/console/qemu/local/-/desk-1?kind=vnc", ""},
		{"$BROWSER with arguments", "https://c.test", "firefox --new-window:chromium", "linux", term,
			[]string{"firefox", "--new-window", "https://c.test/console/kubevirt/c/ns/desk-1?kind=serial"}, "https://c.test/console/kubevirt/c/ns/desk-1?kind=serial", ""},
		{"$BROWSER with %s", "https://c.test", "browse --url=%s", "linux", vnc, []string{"browse", "--url=https://c.test/console/qemu/local/-/desk-1?kind=vnc"},
			"https://c.test/console/qemu/local/-/desk-1?kind=vnc", ""},
		{"vnc without --url", "", "", "linux", vnc, nil, "", "give --url BASE"},
		{"terminal without --url", "", "firefox", "linux", term, nil, "", "offers TERMINAL"},
		{"rdp without an address nor --url", "", "", "linux", rdpNoAddr, nil, "", "has no address this machine reaches"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, manual, err := openCommand(tc.c, tc.base, func(k string) string {
				if k == "BROWSER" {
					return tc.browser
				}
				return ""
			}, tc.goos)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("openCommand = %q, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) || manual != tc.manual {
				t.Fatalf("openCommand = %q, %q, %v; want %q, %q", got, manual, err, tc.want, tc.manual)
			}
		})
	}
}

// TestLaunch: an absent program is an error naming what to install and
// the address to open by hand; a present one is started with the
// arguments (a script here, which records them).
func TestLaunch(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	err := launch([]string{"xfreerdp", "/v:127.0.0.1:1"}, "127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "freerdp2-x11") || !strings.Contains(err.Error(), "open 127.0.0.1:1 yourself") {
		t.Fatalf("launch of an absent xfreerdp: %v", err)
	}
	if err := launch([]string{"xdg-open", "https://c.test/x"}, "https://c.test/x"); err == nil || !strings.Contains(err.Error(), "xdg-utils") {
		t.Fatalf("launch of an absent xdg-open: %v", err)
	}
	out := filepath.Join(dir, "args")
	script := "#!/bin/sh\necho \"$@\" > " + out + ".tmp && mv " + out + ".tmp " + out + "\n"
	if err := os.WriteFile(filepath.Join(dir, "fake-browser"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/bin:/usr/bin")
	if err := launch([]string{"fake-browser", "https://c.test/console/x?kind=vnc"}, ""); err != nil {
		t.Fatal(err)
	}
	for range 500 {
		if b, err := os.ReadFile(out); err == nil {
			if got := strings.TrimSpace(string(b)); got != "https://c.test/console/x?kind=vnc" {
				t.Fatalf("the launched program got %q", got)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the launched program did not run")
}
