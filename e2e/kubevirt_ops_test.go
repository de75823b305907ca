package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/app"
	"github.com/corral-dev/corral/app/fleet"
)

var (
	e2eVM  = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
	e2eVMI = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
	e2eMig = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstancemigrations"}
)

// kvServer is the whole server with the test API server's context, and
// clients for the test to play KubeVirt's controllers with.
type kvServer struct {
	srv  *httptest.Server
	dyn  dynamic.Interface
	kube kubernetes.Interface
	ns   string
	key  string // the KubeVirt context's key
	pve  string // an API token of /api2/json (root@pam)
}

func newKVServer(t *testing.T) *kvServer {
	t.Helper()
	kubeconfig := os.Getenv("TEST_KUBECONFIG")
	if kubeconfig == "" {
		requireEngine(t, "TEST_KUBECONFIG is not set: run the test through hack/testenv.sh")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	k := &kvServer{dyn: dynamic.NewForConfigOrDie(cfg), kube: kube, ns: fmt.Sprintf("corral-ops-%d", time.Now().UnixNano()%1e6)}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := app.New(ctx, app.Config{DataDir: t.TempDir(), Demo: true, DemoSize: 3, Kubeconfig: kubeconfig, RefreshInterval: time.Hour, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if k.pve, err = a.PVE.CreateToken(ctx, "root@pam", "e2e", ""); err != nil {
		t.Fatal(err)
	}
	a.Start(ctx)
	k.srv = httptest.NewServer(a.Handler())
	t.Cleanup(k.srv.Close)
	waitFor(t, "the KubeVirt context's first refresh", func() bool {
		for _, c := range a.Fleet.Snapshot().Contexts {
			if c.Backend == "kubevirt" && c.Health == fleet.HealthOK {
				k.key = c.Key
				return true
			}
		}
		return false
	})
	return k
}

func (k *kvServer) ref(name string) string { return k.key + "/" + k.ns + "/" + name }

// pveResource returns the /api2/json/cluster/resources entry of the VM
// name in the test namespace, or nil.
func (k *kvServer) pveResource(t *testing.T, name string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, k.srv.URL+"/api2/json/cluster/resources?type=vm", nil)
	req.Header.Set("Authorization", "PVEAPIToken="+k.pve)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /cluster/resources: %d %v", resp.StatusCode, err)
	}
	for _, r := range out.Data {
		if r["name"] == name && r["type"] == "qemu" {
			return r
		}
	}
	return nil
}

// vm creates a VM as kubectl would; running, it also gets a VMI on
// node-a that KubeVirt reports live-migratable.
func (k *kvServer) vm(t *testing.T, name string, running bool) {
	t.Helper()
	ctx := context.Background()
	rs := map[bool]string{true: "Always", false: "Halted"}[running]
	vm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": name, "namespace": k.ns},
		"spec": map[string]any{"runStrategy": rs, "template": map[string]any{"spec": map[string]any{
			"domain": map[string]any{"cpu": map[string]any{"cores": int64(1)}, "memory": map[string]any{"guest": "1Gi"}, "devices": map[string]any{}},
		}}},
	}}
	if _, err := k.dyn.Resource(e2eVM).Namespace(k.ns).Create(ctx, vm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !running {
		return
	}
	vmi := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"name": name, "namespace": k.ns},
		"spec":     map[string]any{"domain": map[string]any{"devices": map[string]any{}}},
		"status": map[string]any{"phase": "Running", "nodeName": "node-a", "conditions": []any{
			map[string]any{"type": "LiveMigratable", "status": "True"},
		}},
	}}
	if _, err := k.dyn.Resource(e2eVMI).Namespace(k.ns).Create(ctx, vmi, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// call sends a JSON request and decodes the answer into out.
func (k *kvServer) call(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, k.srv.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

type taskJSON struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Log    string `json:"log"`
}

// task waits for the task to end and returns it.
func (k *kvServer) task(t *testing.T, id string) taskJSON {
	t.Helper()
	var tk taskJSON
	waitFor(t, "task "+id, func() bool {
		tk = taskJSON{}
		k.call(t, http.MethodGet, "/api/tasks/"+id, "", &tk)
		return tk.Status != "running" && tk.Status != ""
	})
	return tk
}

// migration returns the name of the one unfinished migration of vm.
func (k *kvServer) migration(t *testing.T, vm string) string {
	t.Helper()
	list, err := k.dyn.Resource(e2eMig).Namespace(k.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "corral.dev/vm=" + vm})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Items {
		if p, _, _ := unstructured.NestedString(m.Object, "status", "phase"); p == "" {
			return m.GetName()
		}
	}
	t.Fatalf("no pending migration of %s among %d", vm, len(list.Items))
	return ""
}

func (k *kvServer) patch(t *testing.T, gvr schema.GroupVersionResource, name string, v any, sub ...string) {
	t.Helper()
	p, _ := json.Marshal(v)
	if _, err := k.dyn.Resource(gvr).Namespace(k.ns).Patch(context.Background(), name, types.MergePatchType, p, metav1.PatchOptions{}, sub...); err != nil {
		t.Fatal(err)
	}
}

type errJSON struct {
	Error string `json:"error"`
	Task  string `json:"task"`
}

// TestKubeVirtMigrateAPI drives POST /api/vms/{ref}/migrate through the
// whole server against the test API server, the test playing KubeVirt's
// migration controller by writing the migration's status.phase.
func TestKubeVirtMigrateAPI(t *testing.T) {
	k := newKVServer(t)
	k.vm(t, "idle", false)
	k.vm(t, "busy", true)

	var e errJSON
	if st := k.call(t, http.MethodPost, "/api/vms/"+k.ref("idle")+"/migrate", `{}`, &e); st != http.StatusConflict || !strings.Contains(e.Error, "not running") {
		t.Errorf("migrate a stopped VM: %d %q, want 409 saying it is not running", st, e.Error)
	}
	k.patch(t, e2eVMI, "busy", map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "LiveMigratable", "status": "False", "reason": "DisksNotLiveMigratable"}}}})
	if st := k.call(t, http.MethodPost, "/api/vms/"+k.ref("busy")+"/migrate", `{"targetNode": ""}`, &e); st != http.StatusBadRequest || !strings.Contains(e.Error, "ReadWriteMany") {
		t.Errorf("migrate a VM whose disks cannot migrate: %d %q, want 400 with the remedy", st, e.Error)
	}
	k.patch(t, e2eVMI, "busy", map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "LiveMigratable", "status": "True"}}}})
	if st := k.call(t, http.MethodPost, "/api/vms/"+k.ref("busy")+"/migrate", `{"targetNode": "Not A Node"}`, &e); st != http.StatusBadRequest {
		t.Errorf("migrate to a malformed node name: %d %q, want 400", st, e.Error)
	}

	// Success: 202 with a task that follows the phases to Succeeded.
	var acc errJSON
	if st := k.call(t, http.MethodPost, "/api/vms/"+k.ref("busy")+"/migrate", `{}`, &acc); st != http.StatusAccepted || acc.Task == "" {
		t.Fatalf("migrate: %d %+v, want 202 with a task", st, acc)
	}
	name := k.migration(t, "busy")
	for _, p := range []string{"Scheduling", "Running", "Succeeded"} {
		k.patch(t, e2eMig, name, map[string]any{"status": map[string]any{"phase": p}}, "status")
	}
	tk := k.task(t, acc.Task)
	if tk.Status != "done" {
		t.Fatalf("migration task: %+v, want done", tk)
	}
	if !strings.Contains(tk.Log, "Scheduling") || !strings.Contains(tk.Log, "Succeeded") {
		t.Errorf("task log %q does not follow the migration's phases", tk.Log)
	}

	// Failure: the task ends as failed.
	if st := k.call(t, http.MethodPost, "/api/vms/"+k.ref("busy")+"/migrate", ``, &acc); st != http.StatusAccepted {
		t.Fatalf("second migrate: %d, want 202", st)
	}
	k.patch(t, e2eMig, k.migration(t, "busy"), map[string]any{"status": map[string]any{"phase": "Failed"}}, "status")
	if tk := k.task(t, acc.Task); tk.Status != "error" || !strings.Contains(tk.Error, "failed") {
		t.Errorf("failed migration's task: %+v, want error saying it failed", tk)
	}

	// The same route on another backend (the demo's sim migrates too): an
	// unknown node is a 400 naming the nodes.
	e.Error = ""
	if st := k.call(t, http.MethodPost, "/api/vms/web-lab-0000/migrate", `{"targetNode": "nowhere"}`, &e); st != http.StatusBadRequest || !strings.Contains(e.Error, "nowhere") {
		t.Errorf("migrate on a sim context to an unknown node: %d %q, want a 400 naming it", st, e.Error)
	}
}

// TestKubeVirtScaleTemplatePVCAPI drives scale, template and create from
// a PVC through the whole server against the test API server.
func TestKubeVirtScaleTemplatePVCAPI(t *testing.T) {
	k := newKVServer(t)
	k.vm(t, "web", false)
	waitFor(t, "the VM in the inventory", func() bool {
		return k.call(t, http.MethodGet, "/api/vms/"+k.ref("web"), "", nil) == http.StatusOK
	})

	var e errJSON
	for _, c := range []struct{ body, want string }{
		{`{"cpu": 600}`, "cpu 600"},
		{`{"mem": "lots"}`, "mem"},
		{`{}`, "cpu, mem"},
		{`{"cpu": "four"}`, "cpu"},
	} {
		if st := k.call(t, http.MethodPost, "/api/vms/"+k.ref("web")+"/scale", c.body, &e); st != http.StatusBadRequest || !strings.Contains(e.Error, c.want) {
			t.Errorf("scale %s: %d %q, want 400 naming %q", c.body, st, e.Error, c.want)
		}
	}
	if st := k.call(t, http.MethodPost, "/api/vms/"+k.ref("web")+"/scale", `{"cpu": 4, "mem": "8Gi"}`, &e); st != http.StatusOK {
		t.Fatalf("scale: %d %q", st, e.Error)
	}
	vm, err := k.dyn.Resource(e2eVM).Namespace(k.ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cores, _, _ := unstructured.NestedInt64(vm.Object, "spec", "template", "spec", "domain", "cpu", "cores")
	guest, _, _ := unstructured.NestedString(vm.Object, "spec", "template", "spec", "domain", "memory", "guest")
	if cores != 4 || guest != "8192Mi" {
		t.Errorf("after scale the template has %d cores, %s; want 4, 8192Mi", cores, guest)
	}

	// Template: marked, shown, refused a start, unmarked.
	var tm struct {
		IsTemplate bool `json:"isTemplate"`
	}
	if st := k.call(t, http.MethodPost, "/api/vms/"+k.ref("web")+"/template", `{"on": true}`, &tm); st != http.StatusOK || !tm.IsTemplate {
		t.Fatalf("template on: %d %+v", st, tm)
	}
	if st := k.call(t, http.MethodGet, "/api/vms/"+k.ref("web"), "", &tm); st != http.StatusOK || !tm.IsTemplate {
		t.Errorf("GET after template on: %d isTemplate %v", st, tm.IsTemplate)
	}
	if st := k.call(t, http.MethodPost, "/api/vms/"+k.ref("web")+"/start", "", &e); st != http.StatusBadRequest || !strings.Contains(e.Error, "template") {
		t.Errorf("start a template: %d %q, want 400 saying it is a template", st, e.Error)
	}
	if st := k.call(t, http.MethodPost, "/api/vms/"+k.ref("web")+"/template", `{}`, &e); st != http.StatusBadRequest || !strings.Contains(e.Error, "on is required") {
		t.Errorf("template without on: %d %q", st, e.Error)
	}
	e.Error = ""
	if st := k.call(t, http.MethodPost, "/api/vms/web-lab-0000/template", `{"on": true}`, &e); st != http.StatusConflict || !strings.Contains(e.Error, "stop it") {
		t.Errorf("template on a running sim VM: %d %q, want a 409 saying to stop it", st, e.Error)
	}
	// /cluster/resources is served from the fleet's snapshot, which the
	// informer's watch event brings up to date a moment later.
	waitFor(t, "template 1 in /cluster/resources", func() bool {
		r := k.pveResource(t, "web")
		return r != nil && r["template"] == float64(1)
	})
	if st := k.call(t, http.MethodPost, "/api/vms/"+k.ref("web")+"/template", `{"on": false}`, &tm); st != http.StatusOK || tm.IsTemplate {
		t.Errorf("template off: %d %+v", st, tm)
	}
	// The Proxmox API's template call sets KubeVirt's own mark.
	var r map[string]any
	waitFor(t, "template 0 in /cluster/resources", func() bool {
		r = k.pveResource(t, "web")
		return r != nil && r["template"] == float64(0)
	})
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api2/json/nodes/%s/qemu/%d/template", k.srv.URL, r["node"], int64(r["vmid"].(float64))), nil)
	req.Header.Set("Authorization", "PVEAPIToken="+k.pve)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /api2/json/.../template: %d %s (%s)", resp.StatusCode, resp.Status, msg)
	}
	if st := k.call(t, http.MethodGet, "/api/vms/"+k.ref("web"), "", &tm); st != http.StatusOK || !tm.IsTemplate {
		t.Errorf("after the Proxmox API's template call REST says isTemplate %v (%d)", tm.IsTemplate, st)
	}
	vm, err = k.dyn.Resource(e2eVM).Namespace(k.ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil || vm.GetLabels()["corral.dev/template"] != "true" {
		t.Errorf("after the Proxmox API's template call the VM's labels are %v (%v)", vm.GetLabels(), err)
	}
	if st := k.call(t, http.MethodPost, "/api/vms/"+k.ref("web")+"/template", `{"on": false}`, &tm); st != http.StatusOK || tm.IsTemplate {
		t.Errorf("template off again: %d %+v", st, tm)
	}

	// Create from a PVC that does not exist: 400 naming it, at once.
	body := fmt.Sprintf(`{"context": %q, "name": "frompvc", "namespace": %q, "pvc": "no-such-disk"}`, k.key, k.ns)
	if st := k.call(t, http.MethodPost, "/api/vms", body, &e); st != http.StatusBadRequest || !strings.Contains(e.Error, "no-such-disk") {
		t.Errorf("create from a missing PVC: %d %q, want 400 naming it", st, e.Error)
	}
	body = `{"context": "sim/lab", "name": "frompvc", "pvc": "disk"}`
	if st := k.call(t, http.MethodPost, "/api/vms", body, &e); st != http.StatusBadRequest || !strings.Contains(e.Error, "PVC") {
		t.Errorf("create from a PVC on a sim context: %d %q, want 400", st, e.Error)
	}
}
