package backends

import (
	"errors"
	"testing"
)

func TestRefRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		ref  InstanceRef
		text string
	}{
		{"kubevirt", InstanceRef{Backend: KindKubeVirt, Context: "prod", Namespace: "corral-vms", Name: "web"}, "kubevirt/prod/corral-vms/web"},
		{"peer without namespace", InstanceRef{Peer: "lab", Backend: KindQEMU, Context: "local", Name: "dev"}, "peer:lab/qemu/local/-/dev"},
		{"kube context with at", InstanceRef{Backend: KindKubeVirt, Context: "admin@k8s", Namespace: "ns", Name: "a"}, "kubevirt/admin@k8s/ns/a"},
		{"slash and space escaped", InstanceRef{Backend: KindLibvirt, Context: "qemu:///system", Name: "my vm"}, "libvirt/qemu:%2F%2F%2Fsystem/-/my%20vm"},
		{"namespace that is a dash", InstanceRef{Backend: KindSim, Context: "a", Namespace: "-", Name: "b"}, "sim/a/%2D/b"},
		{"percent escaped", InstanceRef{Backend: KindSim, Context: "100%", Name: "x"}, "sim/100%25/-/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.ref.String(); got != tt.text {
				t.Fatalf("String() = %q, want %q", got, tt.text)
			}
			got, err := ParseRef(tt.text)
			if err != nil {
				t.Fatalf("ParseRef(%q): %v", tt.text, err)
			}
			if got != tt.ref {
				t.Fatalf("ParseRef(%q) = %+v, want %+v", tt.text, got, tt.ref)
			}
		})
	}
}

func TestParseRefRefuses(t *testing.T) {
	for _, s := range []string{
		"", "web", "a/b/c", "a/b/c/d/e", "qemu//-/x", "qemu/local/-/", "peer:/qemu/local/-/x",
		"peer:lab/qemu/local/x", "sim/a/-/b%2", "sim/a/-/b%zz", "sim/a/-/b%2f", "sim/a/-/%62",
	} {
		_, err := ParseRef(s)
		if err == nil {
			t.Errorf("ParseRef(%q) succeeded, want an error", s)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRef(%q) error %v is not ErrInvalid", s, err)
		}
		if SafeMessage(err) == "" {
			t.Errorf("ParseRef(%q) error has no safe message", s)
		}
	}
}

func FuzzRef(f *testing.F) {
	f.Add("lab", "qemu", "local", "", "dev")
	f.Add("", "kubevirt", "admin@k8s", "ns", "web")
	f.Add("", "libvirt", "qemu:///system", "-", "a b/c%")
	f.Fuzz(func(t *testing.T, peer, backend, ctx, ns, name string) {
		r := InstanceRef{Peer: peer, Backend: Kind(backend), Context: ctx, Namespace: ns, Name: name}
		if r.Validate() != nil {
			return
		}
		s := r.String()
		got, err := ParseRef(s)
		if err != nil {
			t.Fatalf("ParseRef(%q) of %+v: %v", s, r, err)
		}
		if got != r {
			t.Fatalf("round trip of %+v gave %+v via %q", r, got, s)
		}
	})
}

func FuzzParseRef(f *testing.F) {
	f.Add("kubevirt/prod/corral-vms/web")
	f.Add("peer:lab/qemu/local/-/dev")
	f.Add("sim/a/%2D/b")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(s)
		if err != nil {
			return
		}
		if r.String() != s {
			t.Fatalf("ParseRef(%q) accepted a non-canonical form %q", s, r.String())
		}
	})
}

func TestSplitRefPath(t *testing.T) {
	tests := []struct{ in, ref, rest string }{
		{"libvirt/lab/-/web", "libvirt/lab/-/web", ""},
		{"libvirt/lab/-/web/snapshots/s1/restore", "libvirt/lab/-/web", "snapshots/s1/restore"},
		{"peer:lab/qemu/local/-/dev/start", "peer:lab/qemu/local/-/dev", "start"},
		{"web", "web", ""},
		{"web/snapshots/s1/restore", "web", "snapshots/s1/restore"},
		{"my%20vm/start", "my vm", "start"},
		{"libvirt/qemu:%2F%2F%2Fsystem/-/x/export", "libvirt/qemu:%2F%2F%2Fsystem/-/x", "export"},
	}
	for _, tt := range tests {
		ref, rest, err := SplitRefPath(tt.in)
		if err != nil || ref != tt.ref || rest != tt.rest {
			t.Errorf("SplitRefPath(%q) = %q, %q, %v; want %q, %q", tt.in, ref, rest, err, tt.ref, tt.rest)
		}
	}
	for _, bad := range []string{"", "a//b", "peer:lab/qemu/local", "sim/lab/web", "qemu/start"} {
		if _, _, err := SplitRefPath(bad); err == nil {
			t.Errorf("SplitRefPath(%q) succeeded", bad)
		}
	}
}
