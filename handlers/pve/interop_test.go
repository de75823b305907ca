package pve_test

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"

	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
)

type resources struct {
	Data []struct {
		ID   string `json:"id"`
		VMID int64  `json:"vmid"`
		Name string `json:"name"`
		Node string `json:"node"`
	} `json:"data"`
}

func (e *env) vmidOf(t *testing.T, tok, name string) int64 {
	t.Helper()
	_, body := e.call(t, tok, "GET", "/api2/json/cluster/resources?type=vm", nil)
	var r resources
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	for _, x := range r.Data {
		if x.Name == name {
			return x.VMID
		}
	}
	return 0
}

// TestDashboardInterop: a VM created through /api2/json is in the fleet
// snapshot (what the dashboard shows), and one created through
// app/instances (what the dashboard calls) is in /cluster/resources with
// a vmid that survives a restart (the store reopened).
func TestDashboardInterop(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, envOpts{simSize: 1, dir: dir})
	tok := e.token(t, "root@pam", "interop")
	if code, body := e.call(t, tok, "POST", "/api2/json/nodes/sim-lab/qemu", url.Values{"vmid": {"4321"}, "name": {"from-pve"}}); code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	waitTasks(t, e)
	ref := backends.InstanceRef{Backend: backends.KindSim, Context: "lab", Name: "from-pve"}
	if _, ok := e.fleet.Snapshot().Find(ref); !ok {
		t.Fatal("the VM created through /api2/json is not in the fleet snapshot")
	}
	_, _, err := e.inst.Create(context.Background(), tasks.Origin{Actor: "alice", Surface: "dashboard"},
		instances.CreateRequest{Context: "sim/lab", Name: "from-dash", Memory: "512Mi", Disk: "1Gi"})
	if err != nil {
		t.Fatal(err)
	}
	waitTasks(t, e)
	id := e.vmidOf(t, tok, "from-dash")
	if id == 0 || e.vmidOf(t, tok, "from-pve") != 4321 {
		t.Fatalf("vmids: from-dash %d, from-pve %d (want 4321)", id, e.vmidOf(t, tok, "from-pve"))
	}
	e.tasks.Close()
	_ = e.store.Close()

	// Restart: a new store on the same file; the sim keeps no state, so
	// the fleet is rebuilt with both VMs present again.
	e2 := newEnv(t, envOpts{simSize: 1, dir: dir})
	for _, n := range []string{"from-pve", "from-dash"} {
		if _, err := e2.fleet.Backends()[0].Create(context.Background(), backends.Spec{Name: n, CPUs: 1, MemoryMiB: 512, DiskMiB: 1024}); err != nil {
			t.Fatal(err)
		}
	}
	e2.fleet.Refresh(context.Background())
	tok2 := e2.token(t, "root@pam", "interop2")
	if got := e2.vmidOf(t, tok2, "from-dash"); got != id {
		t.Fatalf("vmid of from-dash after restart = %d, want %d", got, id)
	}
	if got := e2.vmidOf(t, tok2, "from-pve"); got != 4321 {
		t.Fatalf("vmid of from-pve after restart = %d, want 4321", got)
	}
}
