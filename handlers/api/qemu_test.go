package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
)

// TestQEMUOverREST drives a real local-QEMU guest through the REST API:
// create from an image URL (downloaded with progress, checked against its
// sha256), the refusals of a running VM as 400s with their remedies,
// offline snapshots, export and clone of the stopped VM.
func TestQEMUOverREST(t *testing.T) {
	kernel, initrd := qemutest.Guest(t)
	b, err := qemu.New(qemu.Options{Dir: t.TempDir(), Accel: "tcg", Kernel: kernel, Initrd: initrd, Append: qemutest.Append, ShutdownTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, b)
	t.Cleanup(func() {
		e.call(t, "POST", "/api/vms/qemu/local/-/web/stop", "", nil)
		e.call(t, "POST", "/api/vms/qemu/local/-/web2/stop", "", nil)
	})

	// An image served over HTTP, as a catalog entry or a URL would be.
	img := filepath.Join(t.TempDir(), "base.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-f", "qcow2", img, "64M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	data, _ := os.ReadFile(img)
	sum := sha256.Sum256(data)
	imgSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data)
	}))
	defer imgSrv.Close()

	var apiErr apiError
	for body, want := range map[string]string{
		`{"name":"web","image":"debian-13"}`:                     "unknown image",
		`{"name":"web","image":"/no/such.qcow2"}`:                "does not exist",
		`{"name":"web","mem":"lots"}`:                            "does not parse",
		`{"name":"web","sshKey":"not a key"}`:                    "sshKey",
		`{"name":"web","image":"` + imgSrv.URL + `#sha256=abc"}`: "64 hex digits",
	} {
		if resp := e.call(t, "POST", "/api/vms", body, &apiErr); resp.StatusCode != 400 || !strings.Contains(apiErr.Error, want) {
			t.Fatalf("POST %s = %d %q, want 400 with %q", body, resp.StatusCode, apiErr.Error, want)
		}
	}

	var created struct{ Task, Ref string }
	body := `{"name":"web","mem":"256Mi","start":true,"sshKey":"ssh-ed25519 AAAAC3Nz me@host","image":"` + imgSrv.URL + "/base.qcow2#sha256=" + hex.EncodeToString(sum[:]) + `"}`
	if resp := e.call(t, "POST", "/api/vms", body, &created); resp.StatusCode != 202 || created.Ref != "qemu/local/-/web" {
		t.Fatalf("create = %d %+v", resp.StatusCode, created)
	}
	task := waitTaskFor(t, e, created.Task, 3*time.Minute)
	if task.Status != "done" || !strings.Contains(task.Log, "downloaded 100%") || !strings.Contains(task.Log, "verified") {
		t.Fatalf("create task = %+v", task)
	}
	log, _ := b.SerialLog(refOf("web"))
	qemutest.WaitMarker(t, log, qemutest.Marker, 1, 90*time.Second)

	// A running VM: snapshot and export are refused with a remedy, 400.
	if resp := e.call(t, "POST", "/api/vms/web/snapshots", `{"name":"live"}`, &apiErr); resp.StatusCode != 400 || !strings.Contains(apiErr.Error, "shut the VM down first") {
		t.Fatalf("snapshot of a running VM = %d %q", resp.StatusCode, apiErr.Error)
	}
	if resp := e.call(t, "GET", "/api/vms/qemu/local/-/web/export?format=qcow2", "", &apiErr); resp.StatusCode != 400 || !strings.Contains(apiErr.Error, "web") {
		t.Fatalf("export of a running VM = %d %q", resp.StatusCode, apiErr.Error)
	}
	if resp := e.call(t, "POST", "/api/vms/web/stop", "", nil); resp.StatusCode != 200 {
		t.Fatalf("stop = %d", resp.StatusCode)
	}

	// Stopped: offline snapshots, export, clone.
	if resp := e.call(t, "POST", "/api/vms/web/snapshots", `{"name":"before"}`, nil); resp.StatusCode != 201 {
		t.Fatalf("snapshot of a stopped VM = %d", resp.StatusCode)
	}
	var snaps []struct{ Name, Consistency string }
	e.call(t, "GET", "/api/vms/web/snapshots", "", &snaps)
	if len(snaps) != 1 || snaps[0].Name != "before" || snaps[0].Consistency != "offline" {
		t.Fatalf("snapshots = %+v", snaps)
	}
	if resp := e.call(t, "POST", "/api/vms/web/snapshots/before/restore", "", nil); resp.StatusCode != 200 {
		t.Fatalf("restore = %d", resp.StatusCode)
	}
	resp, err := http.Get(e.srv.URL + "/api/vms/web/export?format=qcow2")
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 4)
	io.ReadFull(resp.Body, head)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(head) != "QFI\xfb" || !strings.Contains(resp.Header.Get("Content-Disposition"), "web.qcow2") {
		t.Fatalf("export = %d %q %q", resp.StatusCode, head, resp.Header.Get("Content-Disposition"))
	}
	if resp := e.call(t, "GET", "/api/vms/web/export?format=vmdk", "", &apiErr); resp.StatusCode != 400 || !strings.Contains(apiErr.Error, "raw.gz") {
		t.Fatalf("export as vmdk = %d %q", resp.StatusCode, apiErr.Error)
	}
	var cl struct{ Task, Ref string }
	if resp := e.call(t, "POST", "/api/vms/web/clone", `{"target":"web2"}`, &cl); resp.StatusCode != 202 || cl.Ref != "qemu/local/-/web2" {
		t.Fatalf("clone = %d %+v", resp.StatusCode, cl)
	}
	if task := waitTaskFor(t, e, cl.Task, time.Minute); task.Status != "done" {
		t.Fatalf("clone task = %+v", task)
	}
	if resp := e.call(t, "DELETE", "/api/vms/web/snapshots/before", "", nil); resp.StatusCode != 200 {
		t.Fatalf("delete snapshot = %d", resp.StatusCode)
	}
	for _, n := range []string{"web", "web2"} {
		if resp := e.call(t, "DELETE", "/api/vms/qemu/local/-/"+n, "", nil); resp.StatusCode != 200 {
			t.Fatalf("delete %s = %d", n, resp.StatusCode)
		}
	}
}
