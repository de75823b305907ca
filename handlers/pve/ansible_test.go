package pve_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apppve "github.com/corral-dev/corral/app/pve"
	"github.com/corral-dev/corral/backends"
)

// debianPython is the interpreter Ansible's modules run under: Debian's,
// where python3-proxmoxer is installed (a python3 on PATH may be another
// one without it).
const debianPython = "/usr/bin/python3"

// ansiblePlay is the play every step runs: the connection settings of
// proxmox_kvm once, as module defaults, from the variables file. The
// installed community.general (6.x, Debian's ansible 7) has no api_port:
// proxmoxer takes the port from api_host ("127.0.0.1:PORT").
const ansiblePlay = `- hosts: localhost
  gather_facts: false
  module_defaults:
    community.general.proxmox_kvm:
      api_host: "{{ pve_host }}"
      api_user: "{{ pve_user }}"
      api_token_id: "{{ pve_token_id }}"
      api_token_secret: "{{ pve_token_secret }}"
      validate_certs: false
      node: "{{ pve_node }}"
      name: "{{ vm_name }}"
      timeout: 30
  tasks:
`

// The steps of the cycle; Go checks the server's state after each.
const (
	// create (with a disk and a NIC), create again (no change), read,
	// update what the store keeps (sim and libvirt refuse CPU/memory
	// changes).
	ansibleCreate = `    - name: create
      community.general.proxmox_kvm:
        cores: 2
        memory: 1024
        ostype: l26
        scsihw: virtio-scsi-pci
        scsi:
          scsi0: "local-lvm:4"
        net:
          net0: "virtio,bridge=vmbr0,firewall=0"
        description: made by ansible
      register: created
    - assert:
        that:
          - created is changed
          - created.vmid | int >= 100
          - created.mac.net0 is match('BC:24:11:')
          - created.devices.scsi0 == 'local-lvm:vm-' ~ created.vmid ~ '-disk-0'
    - name: create again
      community.general.proxmox_kvm:
        cores: 2
        memory: 1024
      register: again
    - assert:
        that:
          - again is not changed
          - again.vmid | int == created.vmid | int
    - name: read
      community.general.proxmox_kvm:
        state: current
      register: current
    - assert:
        that:
          - current.status == 'stopped'
          - current.vmid | int == created.vmid | int
    - name: update
      community.general.proxmox_kvm:
        update: true
        description: updated by ansible
        onboot: true
        tags: [ansible, corral]
      register: updated
    - assert:
        that:
          - updated is changed
          - updated.vmid | int == created.vmid | int
`
	ansibleStart = `    - name: start
      community.general.proxmox_kvm:
        state: started
      register: started
    - assert:
        that:
          - started is changed
    - name: start again
      community.general.proxmox_kvm:
        state: started
      register: again
    - assert:
        that:
          - again is not changed
          - again.status == 'running'
    - name: read
      community.general.proxmox_kvm:
        state: current
      register: current
    - assert:
        that:
          - current.status == 'running'
`
	// stop (proxmox_kvm shuts down: status/shutdown, forceStop=0), then
	// delete twice (the second finds nothing).
	ansibleStopDelete = `    - name: stop
      community.general.proxmox_kvm:
        state: stopped
      register: stopped
    - assert:
        that:
          - stopped is changed
          - stopped.status == 'running'
    - name: read
      community.general.proxmox_kvm:
        state: current
      register: current
    - assert:
        that:
          - current.status == 'stopped'
    - name: delete
      community.general.proxmox_kvm:
        state: absent
      register: deleted
    - assert:
        that:
          - deleted is changed
    - name: delete again
      community.general.proxmox_kvm:
        state: absent
      register: again
    - assert:
        that:
          - again is not changed
`
)

// TestAnsibleProxmoxKVM drives Ansible's proxmox_kvm module
// (community.general, through proxmoxer) over a create, read, update,
// start, stop and delete cycle against the server on loopback over TLS
// (self-signed), on the sim context and on libvirt's test driver, and
// checks the server's state from Go between the steps.
func TestAnsibleProxmoxKVM(t *testing.T) {
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		requireEngine(t, "ansible-playbook not installed (hack/install-deps.sh: ansible)", err)
	}
	if out, err := exec.Command(debianPython, "-c", "import proxmoxer, requests").CombinedOutput(); err != nil {
		requireEngine(t, debianPython+" cannot import proxmoxer (hack/install-deps.sh: python3-proxmoxer): "+strings.TrimSpace(string(out)), err)
	}
	for _, node := range []string{"sim-lab", "libvirt-test"} {
		t.Run(node, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOpts{simSize: 2, libvirt: node == "libvirt-test"})
			srv := e.tls(t)
			tok := e.token(t, "root@pam", "ansible")
			user, rest, _ := strings.Cut(tok, "!")
			tokenID, secret, _ := strings.Cut(rest, "=")
			u, err := url.Parse(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			const name = "ans-cycle"
			a := newAnsible(t, map[string]string{
				"pve_host": "127.0.0.1:" + u.Port(), "pve_user": user, "pve_token_id": tokenID,
				"pve_token_secret": secret, "pve_node": node, "vm_name": name,
			})

			a.play("create", ansibleCreate)
			id := e.vmidOf(t, tok, name)
			if id < 100 {
				t.Fatalf("after create: %q not in /cluster/resources (vmid %d)", name, id)
			}
			g := e.guest(t, node, id)
			cfg := g.Config()
			if g.In.State != backends.StateStopped || g.In.CPUs != 2 || g.In.MemoryMiB != 1024 || g.In.Ref.Name != name {
				t.Fatalf("after create: instance %+v, want %s stopped with 2 CPUs and 1024 MiB", g.In, name)
			}
			net0, _ := cfg["net0"].(string)
			scsi0, _ := cfg["scsi0"].(string)
			if !strings.HasPrefix(net0, "virtio=BC:24:11:") || !strings.Contains(net0, "bridge=vmbr0") ||
				scsi0 != fmt.Sprintf("local-lvm:vm-%d-disk-0,size=4G", id) || cfg["ostype"] != "l26" || cfg["scsihw"] != "virtio-scsi-pci" {
				t.Fatalf("after create: config %v", cfg)
			}
			if cfg["description"] != "updated by ansible" || cfg["onboot"] != int64(1) || cfg["tags"] != "ansible,corral" {
				t.Fatalf("after update: description %q, onboot %v, tags %q", cfg["description"], cfg["onboot"], cfg["tags"])
			}

			a.play("start", ansibleStart)
			if g := e.guest(t, node, id); g.In.State != backends.StateRunning {
				t.Fatalf("after start: state %q", g.In.State)
			}
			if g.Config()["net0"] != net0 {
				t.Fatalf("net0 changed: %q -> %q", net0, g.Config()["net0"])
			}

			a.play("stop-delete", ansibleStopDelete)
			if _, err := e.svc.Guest(context.Background(), node, id); err == nil || !strings.Contains(err.Error(), "does not exist") {
				t.Fatalf("after delete: Guest(%d) = %v, want does not exist", id, err)
			}
			if got := e.vmidOf(t, tok, name); got != 0 {
				t.Fatalf("after delete: %q still in /cluster/resources (vmid %d)", name, got)
			}
			for _, in := range e.fleet.Snapshot().Instances {
				if in.Ref.Name == name {
					t.Fatalf("after delete: %s still in the fleet", in.Ref)
				}
			}
		})
	}
}

// guest returns guest id of node as the server sees it now.
func (e *env) guest(t *testing.T, node string, id int64) apppve.Guest {
	t.Helper()
	g, err := e.svc.Guest(context.Background(), node, id)
	if err != nil {
		t.Fatalf("Guest(%s, %d): %v", node, id, err)
	}
	return g
}

// ansible runs playbooks against the test server from a directory of
// its own: HOME (Ansible's local temp and caches) and the variables file
// live there.
type ansible struct {
	t    *testing.T
	dir  string
	vars string
}

func newAnsible(t *testing.T, vars map[string]string) *ansible {
	t.Helper()
	a := &ansible{t: t, dir: t.TempDir()}
	b, err := json.Marshal(vars)
	if err != nil {
		t.Fatal(err)
	}
	a.vars = filepath.Join(a.dir, "vars.json")
	if err := os.WriteFile(a.vars, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return a
}

// play writes the play with tasks as STEP.yml and runs it; a failure
// ends the test with the playbook's output.
func (a *ansible) play(step, tasks string) {
	t := a.t
	t.Helper()
	book := filepath.Join(a.dir, step+".yml")
	if err := os.WriteFile(book, []byte(ansiblePlay+tasks), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ansible-playbook", "-i", "localhost,", "-c", "local",
		"-e", "ansible_python_interpreter="+debianPython, "-e", "@"+a.vars, book)
	cmd.Dir = a.dir
	cmd.Env = []string{"HOME=" + a.dir}
	for _, kv := range os.Environ() { // no Ansible or Python settings of the caller's
		k, _, _ := strings.Cut(kv, "=")
		if k != "HOME" && !strings.HasPrefix(k, "ANSIBLE_") && !strings.HasPrefix(k, "PYTHON") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "ANSIBLE_NOCOLOR=1", "ANSIBLE_RETRY_FILES_ENABLED=0", "ANSIBLE_LOCALHOST_WARNING=0",
		"ANSIBLE_PYTHON_INTERPRETER="+debianPython, "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("ansible-playbook %s: %v\n%s", step, err, out)
		}
		t.Fatalf("ansible-playbook %s failed (%v) after %s:\n%s", step, err, time.Since(start).Round(time.Millisecond), out)
	}
	t.Logf("ansible-playbook %s: ok in %s", step, time.Since(start).Round(time.Millisecond))
}
