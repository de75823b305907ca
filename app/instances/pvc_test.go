package instances_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/store"
)

// pvcs is a simulated context that boots VMs from the PVCs it has, as
// KubeVirt does: it has the capability, not KubeVirt's kind.
type pvcs struct {
	*sim.Backend
	have map[string]bool
}

func (p *pvcs) CheckPVC(ctx context.Context, namespace, name string) error {
	if !p.have[name] {
		return backends.Invalidf("PVC %s does not exist", name)
	}
	return nil
}

// TestCreateFromPVC: whether a create may name a PVC is the backend's
// capability (it checks the PVC before any task starts), whatever its
// kind; a backend without it refuses with a remedy.
func TestCreateFromPVC(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := fleet.New(fleet.Options{Timeout: time.Minute})
	for _, b := range []backends.Backend{
		&pvcs{Backend: sim.New(sim.Options{Context: "disks"}), have: map[string]bool{"gold": true}},
		sim.New(sim.Options{Context: "plain"}),
	} {
		if err := f.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	f.Refresh(ctx)
	tm := tasks.New(st, tasks.Options{})
	t.Cleanup(tm.Close)
	svc := instances.New(f, tm, st, slog.New(slog.DiscardHandler))
	o := tasks.Origin{Actor: "root@example.com", Surface: "cli"}

	for _, tc := range []struct {
		name, context, pvc string
		kind               error  // nil: accepted
		says               string // in the refusal
	}{
		{"a PVC it has", "sim/disks", "gold", nil, ""},
		{"a PVC it does not have", "sim/disks", "nope", backends.ErrInvalid, "PVC nope does not exist"},
		{"a backend without PVCs", "sim/plain", "gold", backends.ErrUnsupported, "give an image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := svc.Create(ctx, o, instances.CreateRequest{Context: tc.context, Name: "from-" + tc.pvc + "-" + strings.TrimPrefix(tc.context, "sim/"), PVC: tc.pvc})
			switch {
			case tc.kind == nil && err != nil:
				t.Fatalf("Create = %v, want accepted", err)
			case tc.kind != nil && (!errors.Is(err, tc.kind) || !strings.Contains(backends.SafeMessage(err), tc.says)):
				t.Fatalf("Create = %v, want %v saying %q", err, tc.kind, tc.says)
			}
		})
	}
}
