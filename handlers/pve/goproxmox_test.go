package pve_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"

	apppve "github.com/corral-dev/corral/app/pve"
)

// TestGoProxmoxCycle drives a full create, read, update, start, stop and
// delete cycle with the go-proxmox client against the server on loopback
// over TLS (self-signed), on the sim context and on libvirt's test
// driver.
func TestGoProxmoxCycle(t *testing.T) {
	for _, node := range []string{"sim-lab", "libvirt-test"} {
		t.Run(node, func(t *testing.T) {
			e := newEnv(t, envOpts{simSize: 3, libvirt: node == "libvirt-test"})
			srv := e.tls(t)
			tok := e.token(t, "root@pam", "ci")
			id, secret, _ := strings.Cut(tok, "=")
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
			c := proxmox.NewClient(srv.URL+"/api2/json", proxmox.WithHTTPClient(hc), proxmox.WithAPIToken(id, secret))
			cycle(t, c, node)
		})
	}
}

func cycle(t *testing.T, c *proxmox.Client, nodeName string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v, err := c.Version(ctx)
	if err != nil || v.Version == "" {
		t.Fatalf("Version = %+v, %v", v, err)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) == 0 {
		t.Fatalf("Nodes = %v, %v", nodes, err)
	}
	cl, err := c.Cluster(ctx)
	if err != nil {
		t.Fatalf("Cluster: %v", err)
	}
	id, err := cl.NextID(ctx)
	if err != nil || id < 100 {
		t.Fatalf("NextID = %d, %v", id, err)
	}
	node, err := c.Node(ctx, nodeName)
	if err != nil {
		t.Fatalf("Node(%s): %v", nodeName, err)
	}
	task, err := node.NewVirtualMachine(ctx, id,
		proxmox.VirtualMachineOption{Name: "name", Value: "gp-cycle"},
		proxmox.VirtualMachineOption{Name: "cores", Value: 2},
		proxmox.VirtualMachineOption{Name: "memory", Value: 1024},
		proxmox.VirtualMachineOption{Name: "scsi0", Value: "local-lvm:4"},
		proxmox.VirtualMachineOption{Name: "net0", Value: "model=virtio,bridge=vmbr0,firewall=0"},
	)
	if err != nil {
		t.Fatalf("NewVirtualMachine: %v", err)
	}
	if err := task.WaitFor(ctx, 30); err != nil || !task.IsSuccessful {
		t.Fatalf("create task: %v (exit %q)", err, task.ExitStatus)
	}
	vm, err := node.VirtualMachine(ctx, id)
	if err != nil {
		t.Fatalf("VirtualMachine(%d): %v", id, err)
	}
	if vm.Name != "gp-cycle" || vm.CPUs != 2 || vm.MaxMem != 1024<<20 || vm.Status != "stopped" {
		t.Fatalf("read back %+v", vm)
	}
	cfg := vm.VirtualMachineConfig
	if !strings.HasPrefix(cfg.Nets["net0"], "virtio=BC:24:11:") || !strings.Contains(cfg.Nets["net0"], "bridge=vmbr0") ||
		!strings.Contains(cfg.SCSIs["scsi0"], "size=4G") || cfg.Digest == "" {
		t.Fatalf("config net0=%q scsi0=%q digest=%q", cfg.Nets["net0"], cfg.SCSIs["scsi0"], cfg.Digest)
	}
	if vm.Template {
		t.Fatal("a VM that is not a template reads as one (template key emitted)")
	}
	if err := vm.ConfigSync(ctx, proxmox.VirtualMachineOption{Name: "description", Value: "made by go-proxmox"},
		proxmox.VirtualMachineOption{Name: "onboot", Value: true}); err != nil {
		t.Fatalf("ConfigSync: %v", err)
	}
	if err := vm.Ping(ctx); err != nil || vm.VirtualMachineConfig.Description != "made by go-proxmox" || !bool(vm.VirtualMachineConfig.OnBoot) {
		t.Fatalf("after update: %v %+v", err, vm.VirtualMachineConfig)
	}
	if vm.VirtualMachineConfig.Nets["net0"] != cfg.Nets["net0"] {
		t.Fatalf("net0 changed on an unrelated update: %q -> %q", cfg.Nets["net0"], vm.VirtualMachineConfig.Nets["net0"])
	}
	task, err = vm.Start(ctx)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := task.WaitFor(ctx, 30); err != nil || !task.IsSuccessful {
		t.Fatalf("start task: %v (exit %q)", err, task.ExitStatus)
	}
	if err := vm.Ping(ctx); err != nil || !vm.IsRunning() {
		t.Fatalf("after start: %v, status %q", err, vm.Status)
	}
	rs, err := cl.Resources(ctx, "vm")
	if err != nil {
		t.Fatalf("Resources: %v", err)
	}
	found := false
	for _, r := range rs {
		found = found || r.VMID == uint64(id) && r.Name == "gp-cycle" && r.Node == nodeName && r.Status == "running"
	}
	if !found {
		t.Fatalf("VM %d not running in /cluster/resources: %+v", id, rs)
	}
	task, err = vm.Stop(ctx)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := task.WaitFor(ctx, 30); err != nil || !task.IsSuccessful {
		t.Fatalf("stop task: %v (exit %q)", err, task.ExitStatus)
	}
	task, err = vm.Delete(ctx, nil)
	if err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := task.WaitFor(ctx, 30); err != nil || !task.IsSuccessful {
		t.Fatalf("delete task: %v (exit %q)", err, task.ExitStatus)
	}
	_, err = node.VirtualMachine(ctx, id)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("after delete: %v, want the 500 whose reason says does not exist", err)
	}
}

// TestGoProxmoxTicketLogin: the client's password mode gets a 401, logs
// in with a token secret as the password, and retries.
func TestGoProxmoxTicketLogin(t *testing.T) {
	e := newEnv(t, envOpts{simSize: 2})
	srv := e.tls(t)
	tok := e.token(t, "alice@pve", "cli")
	_, secret, _ := strings.Cut(tok, "=")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	c := proxmox.NewClient(srv.URL+"/api2/json", proxmox.WithHTTPClient(hc),
		proxmox.WithCredentials(&proxmox.Credentials{Username: "alice@pve", Password: secret}))
	ctx := context.Background()
	if _, err := c.Version(ctx); err != nil {
		t.Fatalf("Version with a ticket: %v", err)
	}
	bad := proxmox.NewClient(srv.URL+"/api2/json", proxmox.WithHTTPClient(hc),
		proxmox.WithCredentials(&proxmox.Credentials{Username: "alice@pve", Password: "wrong"}))
	if _, err := bad.Version(ctx); err == nil {
		t.Fatal("a wrong password logged in")
	}
	var _ = apppve.TicketLifetime
}
