package pve_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// call sends one request through the handler (no TLS, so errors take
// net/http's path: the hijacked status line is tested over TLS in
// TestReasonPhrase).
func (e *env) call(t *testing.T, auth, method, path string, form url.Values) (int, string) {
	t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req := httptest.NewRequest(method, path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if auth != "" {
		req.Header.Set("Authorization", "PVEAPIToken="+auth)
	}
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

var volatile = regexp.MustCompile(`("(uptime|starttime|endtime|snaptime|ctime|pid|pstart)":)\d+|("digest":)"[0-9a-f]{40}"|UPID:[^"]+|BC:24:11:[0-9A-F:]{8}`)

func normalize(s string) string {
	s = volatile.ReplaceAllStringFunc(s, func(m string) string {
		switch {
		case strings.HasPrefix(m, "UPID:"):
			return "UPID:..."
		case strings.HasPrefix(m, "BC:24:11:"):
			return "BC:24:11:XX:XX:XX"
		case strings.HasPrefix(m, `"digest"`):
			return `"digest":"<sha1>"`
		}
		k, _, _ := strings.Cut(m, ":")
		return k + ":0"
	})
	var v any
	if json.Unmarshal([]byte(s), &v) == nil {
		b, _ := json.MarshalIndent(v, "", "  ")
		return string(b)
	}
	return s
}

// TestGolden records the wire format of the endpoints clients parse
// strictly. The files are written from Corral's answers and checked by
// eye against docs/proxmox-api.md (PVE's formats); they are not
// recordings of a real PVE.
func TestGolden(t *testing.T) {
	var simB *sim.Backend
	e := newEnv(t, envOpts{simSize: 2, wrap: func(b backends.Backend) backends.Backend { simB = b.(*sim.Backend); return b }})
	tok := e.token(t, "root@pam", "golden")
	// A CT (the sim runs them like KubeVirt does), numbered 200.
	if _, err := simB.CreateContainer(t.Context(), backends.Spec{Name: "box", CPUs: 1, MemoryMiB: 512, DiskMiB: 8192, Start: true, Tags: []string{"ct"}},
		"docker.io/library/debian:bookworm", false); err != nil {
		t.Fatal(err)
	}
	if err := e.store.ReserveVMID(t.Context(), "sim/lab/-/box", 200); err != nil {
		t.Fatal(err)
	}
	e.fleet.Refresh(t.Context())
	create := url.Values{"vmid": {"123"}, "name": {"golden"}, "cores": {"2"}, "memory": {"2048"},
		"scsi0": {"file=local-lvm:8,size=8589934592,iothread=1"}, "net0": {"model=virtio,bridge=vmbr0,firewall=1"}, "agent": {"1"}}
	if code, body := e.call(t, tok, "POST", "/api2/json/nodes/sim-lab/qemu", create); code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	waitTasks(t, e)
	// Folders are pools: the VM in a nested one, the CT in its parent.
	if err := e.store.CreateFolder(t.Context(), "team/web"); err != nil { // and its parent
		t.Fatal(err)
	}
	for _, f := range [][2]string{{"team/web", "sim/lab/-/golden"}, {"team", "sim/lab/-/box"}} {
		if err := e.store.SetFolderMember(t.Context(), f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, auth, method, path string
		form                     url.Values
		status                   int
	}{
		{"version", tok, "GET", "/api2/json/version", nil, 200},
		{"nextid", tok, "GET", "/api2/json/cluster/nextid", nil, 200},
		{"nextid_taken", tok, "GET", "/api2/json/cluster/nextid?vmid=123", nil, 400},
		{"nodes", tok, "GET", "/api2/json/nodes/", nil, 200},
		{"cluster_status", tok, "GET", "/api2/json/cluster/status", nil, 200},
		{"resources_vm", tok, "GET", "/api2/json/cluster/resources?type=vm", nil, 200},
		{"qemu_list", tok, "GET", "/api2/json/nodes/sim-lab/qemu", nil, 200},
		{"config", tok, "GET", "/api2/json/nodes/sim-lab/qemu/123/config", nil, 200},
		{"pending", tok, "GET", "/api2/json/nodes/sim-lab/qemu/123/pending", nil, 200},
		{"status_current", tok, "GET", "/api2/json/nodes/sim-lab/qemu/123/status/current/", nil, 200},
		{"config_put", tok, "PUT", "/api2/json/nodes/sim-lab/qemu/123/config", url.Values{"description": {"d"}, "delete": {"agent"}}, 200},
		{"missing_guest", tok, "GET", "/api2/json/nodes/sim-lab/qemu/999/status/current", nil, 500},
		{"no_credentials", "", "GET", "/api2/json/version", nil, 401},
		{"bad_token", "root@pam!golden=nope", "GET", "/api2/json/version", nil, 401},
		{"storage", tok, "GET", "/api2/json/nodes/sim-lab/storage", nil, 200},
		{"pools", tok, "GET", "/api2/json/pools", nil, 200},
		{"pool_query", tok, "GET", "/api2/json/pools?poolid=team/web", nil, 200},
		{"pool_path", tok, "GET", "/api2/json/pools/team/web", nil, 200},
		{"pool_path_escaped", tok, "GET", "/api2/json/pools/team%2Fweb/", nil, 200},
		{"pool_lxc", tok, "GET", "/api2/json/pools/team?type=lxc", nil, 200},
		{"pool_missing", tok, "GET", "/api2/json/pools/nope", nil, 500},
		{"resources_pool", tok, "GET", "/api2/json/cluster/resources?type=pool", nil, 200},
		{"lxc", tok, "GET", "/api2/json/nodes/sim-lab/lxc", nil, 200},
		{"lxc_status", tok, "GET", "/api2/json/nodes/sim-lab/lxc/200/status/current", nil, 200},
		{"lxc_config", tok, "GET", "/api2/json/nodes/sim-lab/lxc/200/config", nil, 200},
		{"lxc_shutdown", tok, "POST", "/api2/json/nodes/sim-lab/lxc/200/status/shutdown", url.Values{}, 200},
		{"lxc_stopped", tok, "GET", "/api2/json/nodes/sim-lab/lxc/200/status/current", nil, 200},
		{"lxc_as_qemu", tok, "GET", "/api2/json/nodes/sim-lab/qemu/200/config", nil, 500},
		{"qemu_as_lxc", tok, "GET", "/api2/json/nodes/sim-lab/lxc/123/status/current", nil, 500},
		{"resources_all", tok, "GET", "/api2/json/cluster/resources", nil, 200},
		{"permissions", tok, "GET", "/api2/json/access/permissions?userid=root@pam&path=/", nil, 200},
		{"not_implemented", tok, "GET", "/api2/json/nodes/sim-lab/qemu/123/rrddata", nil, 501},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := e.call(t, c.auth, c.method, c.path, c.form)
			if code != c.status {
				t.Fatalf("%s %s: %d, want %d: %s", c.method, c.path, code, c.status, body)
			}
			got := fmt.Sprintf("%d\n%s\n", code, normalize(body))
			file := filepath.Join("testdata", c.name+".golden")
			if *update {
				_ = os.MkdirAll("testdata", 0o755)
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if !bytes.Equal(want, []byte(got)) {
				t.Errorf("%s differs from %s:\n%s", c.name, file, got)
			}
		})
	}
}

// TestUPIDRouting: UPIDs in the path, raw and percent-encoded.
func TestUPIDRouting(t *testing.T) {
	e := newEnv(t, envOpts{simSize: 1})
	tok := e.token(t, "root@pam", "upid")
	_, body := e.call(t, tok, "POST", "/api2/json/nodes/sim-lab/qemu", url.Values{"vmid": {"150"}, "name": {"u1"}})
	var res struct{ Data string }
	if err := json.Unmarshal([]byte(body), &res); err != nil || !strings.Contains(res.Data, "root@pam!upid") {
		t.Fatalf("create answered %s", body)
	}
	waitTasks(t, e)
	for _, p := range []string{res.Data, strings.ReplaceAll(res.Data, "!", "%21"), strings.ReplaceAll(strings.ReplaceAll(res.Data, "!", "%21"), ":", "%3A")} {
		code, body := e.call(t, tok, "GET", "/api2/json/nodes/sim-lab/tasks/"+p+"/status", nil)
		if code != 200 || !strings.Contains(body, `"exitstatus":"OK"`) || !strings.Contains(body, `"status":"stopped"`) {
			t.Fatalf("status of %s: %d %s", p, code, body)
		}
		code, body = e.call(t, tok, "GET", "/api2/json/nodes/sim-lab/tasks/"+p+"/log/", nil)
		if code != 200 || !strings.Contains(body, `"t":"TASK OK"`) {
			t.Fatalf("log of %s: %d %s", p, code, body)
		}
	}
}

// TestReasonPhrase: over a real connection the status line carries
// PVE's message, which go-proxmox and Ansible read.
func TestReasonPhrase(t *testing.T) {
	e := newEnv(t, envOpts{simSize: 1})
	tok := e.token(t, "root@pam", "rp")
	srv := e.tls(t)
	req, _ := http.NewRequest("GET", srv.URL+"/api2/json/nodes/sim-lab/qemu/4242/config", nil)
	req.Header.Set("Authorization", "PVEAPIToken="+tok)
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	want := "500 Configuration file 'nodes/sim-lab/qemu-server/4242.conf' does not exist"
	if res.Status != want {
		t.Fatalf("status line %q, want %q", res.Status, want)
	}
}

func waitTasks(t *testing.T, e *env) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ts, _ := e.tasks.Recent(t.Context(), 20)
		busy := false
		for _, x := range ts {
			busy = busy || x.Status == "running"
		}
		if !busy {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("tasks still running")
}
