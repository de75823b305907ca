package proxmox

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/corral-dev/corral/backends"
)

// TestMapError: every answer of the server lands on one kind, and the
// safe message never carries the server's text or the URL.
func TestMapError(t *testing.T) {
	const secretish = "/mnt/pve/nfs1 on pve-host.internal"
	api := func(code int, msg string, errs map[string]string) error {
		return &proxmox.APIError{StatusCode: code, Status: http.StatusText(code), Message: msg, Errors: errs}
	}
	tests := []struct {
		name string
		err  error
		kind error
	}{
		{"401", api(401, "authentication failure "+secretish, nil), backends.ErrForbidden},
		{"403", api(403, "Permission check failed "+secretish, nil), backends.ErrForbidden},
		{"404", api(404, secretish, nil), backends.ErrNotFound},
		{"500 does not exist", api(500, "Configuration file 'nodes/pve/qemu-server/1.conf' does not exist "+secretish, nil), backends.ErrNotFound},
		{"400 taken vmid", api(400, "Parameter verification failed.", map[string]string{"vmid": "VM 100 already exists"}), backends.ErrConflict},
		{"400 invalid", api(400, "Parameter verification failed.", map[string]string{"scsi0": "invalid format " + secretish}), backends.ErrInvalid},
		{"500", api(500, secretish, nil), backends.ErrFailed},
		{"595 node", api(595, "No route to host "+secretish, nil), backends.ErrUnavailable},
		{"connection refused", &url.Error{Op: "Get", URL: "https://pve-host.internal:8006/api2/json/nodes", Err: syscall.ECONNREFUSED}, backends.ErrUnavailable},
		{"task failed", &proxmox.TaskFailedError{UPID: "UPID:pve:1", ExitStatus: "storage 'x' " + secretish}, backends.ErrFailed},
		{"task raced", &proxmox.TaskFailedError{UPID: "UPID:pve:1", ExitStatus: "VM 101 already running"}, backends.ErrConflict},
		{"task timeout", proxmox.ErrTimeout, backends.ErrTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := mapError("lab", "start", "web", tc.err)
			if !errors.Is(err, tc.kind) {
				t.Fatalf("mapError = %v (kind %v), want %v", err, backends.KindOf(err), tc.kind)
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("the cause is lost: %v", err)
			}
			msg := backends.SafeMessage(err)
			if msg == "" || strings.Contains(msg, "pve-host") || strings.Contains(msg, "nfs1") || strings.Contains(msg, "https://") {
				t.Fatalf("safe message %q", msg)
			}
		})
	}
}

// TestSnapshotParse: Corral's line gives the consistency and is not part
// of the description shown; without it the weaker claim is made.
func TestSnapshotParse(t *testing.T) {
	tests := []struct {
		name string
		in   snapshot
		want backends.Snapshot
	}{
		{"marked", snapshot{Name: "a", Description: "before upgrade\ncorral-consistency: offline"}, backends.Snapshot{Name: "a", Consistency: backends.ConsistencyOffline, Description: "before upgrade"}},
		{"unmarked", snapshot{Name: "b", Description: "by hand"}, backends.Snapshot{Name: "b", Consistency: backends.ConsistencyCrash, Description: "by hand"}},
		{"with RAM", snapshot{Name: "c", Vmstate: 1}, backends.Snapshot{Name: "c", Consistency: backends.ConsistencyFilesystem}},
		{"unknown word", snapshot{Name: "d", Description: "corral-consistency: perfect"}, backends.Snapshot{Name: "d", Consistency: backends.ConsistencyCrash}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.parse(); got != tc.want {
				t.Fatalf("parse = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestNameGuests: a name shared on a node, or none, falls back to the vmid.
func TestNameGuests(t *testing.T) {
	gs := []*guest{{VMID: 100, Name: "web"}, {VMID: 101, Name: "db"}, {VMID: 102, Name: "db"}, {VMID: 103}}
	nameGuests(gs)
	var got []string
	for _, g := range gs {
		got = append(got, g.name)
	}
	if strings.Join(got, " ") != "web 101 102 103" {
		t.Fatalf("names = %v", got)
	}
}
