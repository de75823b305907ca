package pve_test

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
)

// TestGoProxmoxContainers reads and drives a CT of the sim (a context
// that runs containers) as an lxc guest with go-proxmox: the node's
// list, status and config (Ping), shutdown and start as tasks.
func TestGoProxmoxContainers(t *testing.T) {
	var simB *sim.Backend
	e := newEnv(t, envOpts{simSize: 1, wrap: func(b backends.Backend) backends.Backend { simB = b.(*sim.Backend); return b }})
	ctx := t.Context()
	if _, err := simB.CreateContainer(ctx, backends.Spec{Name: "box", CPUs: 2, MemoryMiB: 1024, DiskMiB: 4096, Start: true},
		"docker.io/library/debian:bookworm", false); err != nil {
		t.Fatal(err)
	}
	e.fleet.Refresh(ctx)
	srv := e.tls(t)
	id, secret, _ := strings.Cut(e.token(t, "root@pam", "lxc"), "=")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	c := proxmox.NewClient(srv.URL+"/api2/json", proxmox.WithHTTPClient(hc), proxmox.WithAPIToken(id, secret))
	node, err := c.Node(ctx, "sim-lab")
	if err != nil {
		t.Fatal(err)
	}
	cts, err := node.Containers(ctx)
	if err != nil || len(cts) != 1 || cts[0].Name != "box" || cts[0].Status != "running" {
		t.Fatalf("Containers = %+v, %v; want box running", cts, err)
	}
	ct, err := node.Container(ctx, int(cts[0].VMID))
	if err != nil {
		t.Fatalf("Container: %v", err)
	}
	if ct.ContainerConfig == nil || ct.ContainerConfig.Hostname != "box" || ct.ContainerConfig.Cores != 2 || ct.ContainerConfig.Digest == "" {
		t.Fatalf("config %+v", ct.ContainerConfig)
	}
	task, err := ct.Shutdown(ctx, false, 30)
	if err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := task.WaitFor(ctx, 10); err != nil || !task.IsSuccessful {
		t.Fatalf("shutdown task: %+v, %v", task, err)
	}
	if err := ct.Ping(ctx); err != nil || ct.Status != "stopped" {
		t.Fatalf("after shutdown: %q, %v", ct.Status, err)
	}
	task, err = ct.Start(ctx)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := task.WaitFor(ctx, 10); err != nil || !task.IsSuccessful {
		t.Fatalf("start task: %+v, %v", task, err)
	}
	if in, err := simB.Get(ctx, backends.InstanceRef{Backend: backends.KindSim, Context: "lab", Name: "box"}); err != nil || in.State != backends.StateRunning {
		t.Fatalf("the CT after start: %+v, %v", in, err)
	}
}
