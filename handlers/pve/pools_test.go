package pve_test

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"

	proxmox "github.com/luthermonson/go-proxmox"
)

// TestGoProxmoxPools reads folders as pools with go-proxmox: the list,
// one nested pool by id (go-proxmox uses the query form, so the slash
// travels escaped in the query), and the pool of a guest in
// /cluster/resources.
func TestGoProxmoxPools(t *testing.T) {
	e := newEnv(t, envOpts{simSize: 3})
	ctx := t.Context()
	if err := e.store.CreateFolder(ctx, "team/web"); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetFolderMember(ctx, "team/web", "sim/lab/-/db-lab-0001"); err != nil {
		t.Fatal(err)
	}
	srv := e.tls(t)
	id, secret, _ := strings.Cut(e.token(t, "root@pam", "pools"), "=")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	c := proxmox.NewClient(srv.URL+"/api2/json", proxmox.WithHTTPClient(hc), proxmox.WithAPIToken(id, secret))

	pools, err := c.Pools(ctx)
	if err != nil || len(pools) != 2 || pools[0].PoolID != "team" || pools[1].PoolID != "team/web" {
		t.Fatalf("Pools = %+v, %v; want team and team/web", pools, err)
	}
	p, err := c.Pool(ctx, "team/web")
	if err != nil || len(p.Members) != 1 || p.Members[0].Name != "db-lab-0001" || p.Members[0].Type != "qemu" ||
		p.Members[0].VMID < 100 || p.Members[0].Node != "sim-lab" {
		t.Fatalf("Pool(team/web) = %+v, %v", p, err)
	}
	if p, err := c.Pool(ctx, "team"); err != nil || len(p.Members) != 0 {
		t.Fatalf("Pool(team) = %+v, %v; want no members (a subfolder's are its own)", p, err)
	}
	if _, err := c.Pool(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Pool(nope): %v; want does not exist", err)
	}
	cl, err := c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := cl.Resources(ctx, "vm")
	if err != nil {
		t.Fatal(err)
	}
	pooled := map[string]string{}
	for _, r := range rs {
		pooled[r.Name] = r.Pool
	}
	if pooled["db-lab-0001"] != "team/web" || pooled["web-lab-0000"] != "" {
		t.Fatalf("pools in /cluster/resources: %v", pooled)
	}
}
