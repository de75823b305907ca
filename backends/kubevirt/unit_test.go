package kubevirt

// Tests of the pure logic; they need no API server and always run.

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral/backends"
)

func TestMapError(t *testing.T) {
	vms := schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachines"}
	for _, c := range []struct {
		name    string
		err     error
		kind    error
		want    string // in the safe message
		secrets string // never in the safe message
	}{
		{"not found", apierrors.NewNotFound(vms, "web"), backends.ErrNotFound, "VM ns/web does not exist", ""},
		{"namespace missing", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "nope"), backends.ErrInvalid, "namespace nope does not exist", ""},
		{"already exists", apierrors.NewAlreadyExists(vms, "web"), backends.ErrConflict, "already exists", ""},
		{"stale", apierrors.NewConflict(vms, "web", errors.New("the object has been modified")), backends.ErrConflict, "retry", "modified"},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: "kubevirt.io", Kind: "VirtualMachine"}, "web-",
			field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), "web-", "a lowercase RFC 1123 subdomain with secret detail")}),
			backends.ErrInvalid, "invalid metadata.name", "secret detail"},
		{"bad request", apierrors.NewBadRequest("cannot decode token abc"), backends.ErrInvalid, "bad request", "token abc"},
		{"forbidden", apierrors.NewForbidden(vms, "web", errors.New(`User "alice" cannot patch`)), backends.ErrForbidden, "may not", "alice"},
		{"unauthorized", apierrors.NewUnauthorized("token expired"), backends.ErrForbidden, "credentials", "token expired"},
		{"unavailable", apierrors.NewServiceUnavailable("etcd down"), backends.ErrUnavailable, "context prod is unreachable", "etcd"},
		{"too many", apierrors.NewTooManyRequests("slow down", 1), backends.ErrUnavailable, "unreachable", ""},
		{"server timeout", apierrors.NewTimeoutError("took too long", 1), backends.ErrTimeout, "did not answer in time", ""},
		{"deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), backends.ErrTimeout, "did not answer in time", ""},
		{"internal", apierrors.NewInternalError(errors.New("panic at 10.0.0.1")), backends.ErrFailed, "could not", "10.0.0.1"},
		{"refused", &url.Error{Op: "Get", URL: "https://10.1.2.3:6443/apis/kubevirt.io/v1", Err: syscall.ECONNREFUSED}, backends.ErrUnavailable, "unreachable", "10.1.2.3"},
		{"ours", backends.Conflictf("already running"), backends.ErrConflict, "already running", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := mapError("prod", "start", "VM ns/web", c.err)
			if !errors.Is(err, c.kind) {
				t.Fatalf("kind %v, want %v (%v)", backends.KindOf(err), c.kind, err)
			}
			msg := backends.SafeMessage(err)
			if !strings.Contains(msg, c.want) {
				t.Fatalf("message %q does not contain %q", msg, c.want)
			}
			if c.secrets != "" && strings.Contains(msg, c.secrets) {
				t.Fatalf("message %q leaks %q", msg, c.secrets)
			}
			if !errors.Is(err, c.err) {
				t.Fatalf("the cause is lost: %v", err)
			}
		})
	}
}

func TestState(t *testing.T) {
	vm := func(rs, printable string) obj {
		o := obj{"spec": obj{"runStrategy": rs}}
		if printable != "" {
			o["status"] = obj{"printableStatus": printable}
		}
		return o
	}
	running := obj{"status": obj{"phase": "Running"}}
	for _, c := range []struct {
		name string
		vm   obj
		vmi  obj
		want backends.State
	}{
		{"new halted", vm("Halted", ""), nil, backends.StateStopped},
		{"new always", vm("Always", ""), nil, backends.StateStarting},
		{"always with running VMI", vm("Always", ""), running, backends.StateRunning},
		{"halted with VMI", vm("Halted", ""), running, backends.StateStopping},
		{"manual without VMI", vm("Manual", ""), nil, backends.StateStopped},
		{"manual with VMI", vm("Manual", ""), running, backends.StateRunning},
		{"legacy running true", obj{"spec": obj{"running": true}}, running, backends.StateRunning},
		{"printable running", vm("Always", "Running"), running, backends.StateRunning},
		{"printable paused", vm("Always", "Paused"), running, backends.StatePaused},
		{"printable stopped", vm("Halted", "Stopped"), nil, backends.StateStopped},
		{"start requested", vm("Always", "Stopped"), nil, backends.StateStarting},
		{"stop requested", vm("Halted", "Running"), running, backends.StateStopping},
		{"provisioning", vm("Always", "Provisioning"), nil, backends.StateStarting},
		{"migrating", vm("Always", "Migrating"), running, backends.StateRunning},
		{"image pull error", vm("Always", "ErrImagePull"), nil, backends.StateUnknown},
	} {
		if got := state(c.vm, c.vmi); got != c.want {
			t.Errorf("%s: state = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestInstanceSizes(t *testing.T) {
	b := &Backend{opts: Options{Context: "c"}}
	vm := obj{
		"metadata": obj{"name": "web", "namespace": "ns", "annotations": obj{annDiskMiB: "20480"}},
		"spec": obj{"template": obj{"spec": obj{"domain": obj{
			"cpu":    obj{"cores": int64(2), "sockets": int64(2)},
			"memory": obj{"guest": "6Gi"},
		}}}},
	}
	in := b.instance(vm, nil)
	if in.CPUs != 4 || in.MemoryMiB != 6144 || in.DiskMiB != 20480 {
		t.Fatalf("instance = %+v, want 4 CPUs, 6144 MiB memory, 20480 MiB disk", in)
	}
	// An instancetype VM: sizes come from the running VMI.
	vm = obj{"metadata": obj{"name": "it", "namespace": "ns"}, "spec": obj{"instancetype": obj{"name": "u1.medium"}}}
	vmi := obj{"spec": obj{"domain": obj{"cpu": obj{"cores": int64(1), "sockets": int64(1)}, "memory": obj{"guest": "4Gi"}}}}
	if in := b.instance(vm, vmi); in.CPUs != 1 || in.MemoryMiB != 4096 {
		t.Fatalf("instancetype VM = %+v", in)
	}
}

func TestParseSource(t *testing.T) {
	for _, c := range []struct {
		image string
		want  source
		ok    bool
	}{
		{"", source{blank: true}, true},
		{"quay.io/containerdisks/fedora:42", source{image: "quay.io/containerdisks/fedora:42"}, true},
		{"docker://quay.io/containerdisks/fedora:42", source{image: "quay.io/containerdisks/fedora:42"}, true},
		{"registry.local:5000/vm/disk@sha256:" + strings.Repeat("a", 64), source{image: "registry.local:5000/vm/disk@sha256:" + strings.Repeat("a", 64)}, true},
		{"localhost/disk:1", source{image: "localhost/disk:1"}, true},
		{"https://example.com/debian.qcow2", source{url: "https://example.com/debian.qcow2"}, true},
		{"fedora:42", source{}, false},
		{"/var/lib/disk.qcow2", source{}, false},
		{"ftp://example.com/disk.img", source{}, false},
	} {
		got, err := parseSource(c.image)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseSource(%q) = %+v, %v", c.image, got, err)
		}
		if err != nil && !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("parseSource(%q): %v is not Invalid", c.image, err)
		}
	}
}

func TestVMID(t *testing.T) {
	for _, name := range []string{"web", "db", "a", strings.Repeat("x", 63)} {
		got := VMID(name)
		want := 100 + int64(crc32.ChecksumIEEE([]byte(name)))%999999900
		if got != want || got < 100 || got > 999999999 || VMID(name) != got {
			t.Errorf("VMID(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestSnapshotConsistency(t *testing.T) {
	snap := func(status obj, annotation string) unstructured.Unstructured {
		o := obj{"metadata": obj{"name": "s"}}
		if status != nil {
			o["status"] = status
		}
		u := unstructured.Unstructured{Object: o}
		if annotation != "" {
			u.SetAnnotations(map[string]string{annConsistency: annotation})
		}
		return u
	}
	for _, c := range []struct {
		name string
		u    unstructured.Unstructured
		want backends.Consistency
	}{
		{"agent froze", snap(obj{"readyToUse": true, "indications": []any{"Online", "GuestAgent"}}, ""), backends.ConsistencyFilesystem},
		{"quiesce failed", snap(obj{"readyToUse": true, "indications": []any{"Online", "GuestAgent", "QuiesceFailed"}}, ""), backends.ConsistencyCrash},
		{"online no agent", snap(obj{"readyToUse": true, "indications": []any{"Online", "NoGuestAgent"}}, ""), backends.ConsistencyCrash},
		{"offline", snap(obj{"readyToUse": true, "phase": "Succeeded"}, "crash"), backends.ConsistencyOffline},
		{"status wins over annotation", snap(obj{"phase": "Succeeded", "indications": []any{"Online"}}, "offline"), backends.ConsistencyCrash},
		{"not ready: annotation", snap(obj{"phase": "InProgress"}, "offline"), backends.ConsistencyOffline},
		{"nothing known", snap(nil, ""), backends.ConsistencyCrash},
	} {
		if got := snapshotConsistency(c.u); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: "t"}}]
contexts: [{name: prod, context: {cluster: c, user: u}}, {name: lab, context: {cluster: c, user: u}}]
current-context: prod
`

func TestContextsFromKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ContextsFromKubeconfig(path)
	if err != nil || !slices.Equal(got, []string{"lab", "prod"}) {
		t.Fatalf("ContextsFromKubeconfig = %v, %v", got, err)
	}
	if _, err := ContextsFromKubeconfig(filepath.Join(t.TempDir(), "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing kubeconfig: %v, want fs.ErrNotExist", err)
	}
	if _, err := New(Options{Context: "lab", Kubeconfig: path}); err != nil {
		t.Fatalf("New(lab): %v", err)
	}
	if _, err := New(Options{Context: "nope", Kubeconfig: path}); err == nil {
		t.Fatal("New with a context the kubeconfig lacks succeeded")
	}
	if _, err := New(Options{Context: "lab"}); err == nil {
		t.Fatal("New without a kubeconfig or REST config succeeded")
	}
}

// TestPauseSubresource plays a cluster that serves (or fails to serve)
// KubeVirt's aggregated subresources API, which the test API server cannot
// serve: the answer to PUT .../pause decides the outcome.
func TestPauseSubresource(t *testing.T) {
	for _, c := range []struct {
		status int
		kind   error
		want   string
	}{
		{http.StatusOK, nil, ""},
		{http.StatusNotFound, backends.ErrUnsupported, "virtctl pause vm web -n ns"},
		{http.StatusServiceUnavailable, backends.ErrUnavailable, "context prod is unreachable"},
		{http.StatusConflict, backends.ErrConflict, "retry"},
		{http.StatusForbidden, backends.ErrForbidden, "may not"},
	} {
		t.Run(http.StatusText(c.status), func(t *testing.T) {
			var paused bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				switch {
				case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/virtualmachines/web"):
					fmt.Fprint(w, `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"web","namespace":"ns"},"spec":{"runStrategy":"Always"},"status":{"printableStatus":"Running"}}`)
				case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/virtualmachineinstances/web"):
					fmt.Fprint(w, `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":"web","namespace":"ns"},"status":{"phase":"Running"}}`)
				case r.Method == http.MethodPut && r.URL.Path == "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/web/pause":
					paused = c.status == http.StatusOK
					w.WriteHeader(c.status)
					fmt.Fprint(w, `{}`)
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			b, err := New(Options{Context: "prod", RESTConfig: &rest.Config{Host: srv.URL}})
			if err != nil {
				t.Fatal(err)
			}
			ref := backends.InstanceRef{Backend: backends.KindKubeVirt, Context: "prod", Namespace: "ns", Name: "web"}
			err = b.Power(context.Background(), ref, backends.ActionPause)
			if c.kind == nil {
				if err != nil || !paused {
					t.Fatalf("pause = %v, paused %v", err, paused)
				}
				return
			}
			if !errors.Is(err, c.kind) || !strings.Contains(backends.SafeMessage(err), c.want) {
				t.Fatalf("pause = %v (safe %q), want kind %v naming %q", err, backends.SafeMessage(err), c.kind, c.want)
			}
			if strings.Contains(backends.SafeMessage(err), "127.0.0.1") {
				t.Fatalf("message %q names the server", backends.SafeMessage(err))
			}
		})
	}
}
