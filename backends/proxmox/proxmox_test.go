package proxmox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/backendtest"
	"github.com/corral-dev/corral/backends/proxmox"
)

func harness(s *server) backendtest.Harness {
	return backendtest.Harness{
		New: func(t *testing.T) backends.Backend { return s.backend("pve") },
		Spec: func(t *testing.T, name string) backends.Spec {
			return backends.Spec{Name: name, Namespace: s.node, CPUs: 2, MemoryMiB: 1024, DiskMiB: 4096}
		},
		Settle:          10 * time.Second,
		RunningSnapshot: backends.ConsistencyCrash,
		Pause:           true,
	}
}

// TestConformanceSim runs the suite against a second Corral serving its
// /api2/json over the sim backend.
func TestConformanceSim(t *testing.T) {
	backendtest.Run(t, harness(simServer(t)))
}

// TestConformanceLibvirt runs it against a second Corral over libvirt's
// test:///default driver.
func TestConformanceLibvirt(t *testing.T) {
	backendtest.Run(t, harness(libvirtServer(t)))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantSafe fails unless err is of kind and its safe message leaks none
// of the secrets.
func wantSafe(t *testing.T, what string, err, kind error, secrets ...string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: %v (kind %v), want %v", what, err, backends.KindOf(err), kind)
	}
	msg := backends.SafeMessage(err)
	if msg == "" {
		t.Fatalf("%s: %v has no safe message", what, err)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			t.Fatalf("%s: safe message %q shows %q", what, msg, s)
		}
	}
}

// TestUnreachable: a server that does not answer is Unavailable, named
// by its context, without the URL.
func TestUnreachable(t *testing.T) {
	url := "https://127.0.0.1:1/api2/json" // port 1: nothing listens
	b := proxmox.New(proxmox.Options{Context: "gone", URL: url, TokenID: "root@pam!x", Secret: "s3cret-value", InsecureTLS: true})
	_, err := b.List(ctxT(t))
	wantSafe(t, "List", err, backends.ErrUnavailable, "127.0.0.1", url, "s3cret-value")
	if !strings.Contains(backends.SafeMessage(err), "gone") {
		t.Fatalf("message %q does not name the context", backends.SafeMessage(err))
	}
	checks := b.Doctor(ctxT(t))
	if len(checks) == 0 || checks[0].OK || strings.Contains(checks[0].Message, "127.0.0.1") {
		t.Fatalf("Doctor of an unreachable server = %+v", checks)
	}
}

// TestWrongToken: a secret the server does not know is Forbidden, and
// the message shows neither the token nor the server's text.
func TestWrongToken(t *testing.T) {
	s := simServer(t)
	s.secret = "00000000-0000-0000-0000-000000000000"
	b := s.backend("pve")
	_, err := b.List(ctxT(t))
	wantSafe(t, "List with a wrong secret", err, backends.ErrForbidden, s.secret, s.tokenID, "127.0.0.1", "authentication failure")
	_, err = b.Get(ctxT(t), backends.InstanceRef{Backend: backends.KindProxmox, Context: "pve", Namespace: s.node, Name: "x"})
	wantSafe(t, "Get with a wrong secret", err, backends.ErrForbidden)
	checks := b.Doctor(ctxT(t))
	if len(checks) != 1 || checks[0].OK || !strings.Contains(checks[0].Message, "token") {
		t.Fatalf("Doctor with a wrong token = %+v", checks)
	}
}

// TestUntrustedCertificate: the self-signed certificate is refused unless
// the CA or InsecureTLS says otherwise.
func TestUntrustedCertificate(t *testing.T) {
	s := simServer(t)
	b := proxmox.New(proxmox.Options{Context: "pve", URL: s.url, TokenID: s.tokenID, Secret: s.secret})
	_, err := b.List(ctxT(t))
	wantSafe(t, "List over an untrusted certificate", err, backends.ErrUnavailable, s.url)
	b = proxmox.New(proxmox.Options{Context: "pve", URL: s.url, TokenID: s.tokenID, Secret: s.secret, InsecureTLS: true})
	if _, err := b.List(ctxT(t)); err != nil {
		t.Fatalf("List with InsecureTLS: %v", err)
	}
}

// TestInventory: the guests a server already has are listed with their
// node as namespace, and Doctor sees the version and the node.
func TestInventory(t *testing.T) {
	s := simServer(t)
	b := s.backend("pve")
	list, err := b.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("List = %d instances, want the sim's 2", len(list))
	}
	for _, in := range list {
		if in.Ref.Namespace != s.node || in.Node != s.node || in.Type != backends.TypeVM || in.CPUs <= 0 || in.MemoryMiB <= 0 {
			t.Fatalf("instance %+v", in)
		}
		if in.Ref.String() != "proxmox/pve/"+s.node+"/"+in.Ref.Name {
			t.Fatalf("ref %s", in.Ref)
		}
	}
	checks := b.Doctor(ctxT(t))
	for _, c := range checks {
		if !c.OK {
			t.Fatalf("Doctor = %+v", checks)
		}
	}
	if len(checks) != 3 || !strings.Contains(checks[1].Message, "8.") {
		t.Fatalf("Doctor = %+v", checks)
	}
}

// TestCreateNeedsNode: without a node the spec is Invalid; with one that
// does not exist the create fails as NotFound.
func TestCreateNeedsNode(t *testing.T) {
	s := simServer(t)
	b := s.backend("pve")
	_, err := b.Create(ctxT(t), backends.Spec{Name: "nonode"})
	wantSafe(t, "Create without a node", err, backends.ErrInvalid)
	_, err = b.Create(ctxT(t), backends.Spec{Name: "ct", Namespace: s.node, Type: backends.TypeCT})
	wantSafe(t, "Create of a CT", err, backends.ErrUnsupported)
}
