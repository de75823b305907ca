package ctpool

import (
	"context"
	"errors"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
)

// Cluster is one Kubernetes context whose CT pools the broker serves.
type Cluster struct {
	Context string // the Corral context (kubevirt/CONTEXT)
	Kube    kubernetes.Interface
}

// Seam serves the CT pools of every namespace of some clusters to the
// broker (vdi.CTPools).
type Seam struct {
	// Clusters returns the clusters to serve (the KubeVirt contexts).
	Clusters func() []Cluster
	Log      *slog.Logger
	// Now is the clock of the claims; nil means time.Now.
	Now func() time.Time
}

var _ vdi.CTPools = (*Seam)(nil)

func (s *Seam) manager(c Cluster, ns string) *Manager {
	return New(c.Kube, Options{Context: c.Context, Namespace: ns, Log: s.Log, Now: s.Now})
}

// find returns the manager of the namespace that holds pool.
func (s *Seam) find(ctx context.Context, ns, pool string) (*Manager, Cluster, error) {
	for _, c := range s.Clusters() {
		m := s.manager(c, ns)
		if _, err := m.Get(ctx, pool); err == nil {
			return m, c, nil
		} else if !errors.Is(err, backends.ErrNotFound) {
			return nil, c, err
		}
	}
	return nil, Cluster{}, backends.NotFoundf("CT pool %s/%s does not exist", ns, pool)
}

// Summaries implements vdi.CTPools.
func (s *Seam) Summaries(ctx context.Context) ([]vdi.PoolSummary, error) {
	var out []vdi.PoolSummary
	var errs []error
	for _, c := range s.Clusters() {
		defs, err := s.manager(c, "").List(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, d := range defs {
			st, err := s.manager(c, d.cm.Namespace).observePool(ctx, d)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, vdi.PoolSummary{ID: "ct/" + d.cm.Namespace + "/" + d.Name, Ephemeral: true,
				Members: st.Desired, Claimed: st.Claimed, Free: st.Free})
		}
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// Claim implements vdi.CTPools.
func (s *Seam) Claim(ctx context.Context, pool vdi.PoolID, holder string) (vdi.Claim, error, error) {
	m, _, err := s.find(ctx, pool.Namespace, pool.Pool)
	if err != nil {
		return vdi.Claim{}, nil, err
	}
	c, err := m.Claim(ctx, pool.Pool, holder)
	return c.Claim, c.StartError, err
}

// Claims implements vdi.CTPools.
func (s *Seam) Claims(ctx context.Context) ([]vdi.Claim, error) {
	var out []vdi.Claim
	for _, c := range s.Clusters() {
		cs, err := vdi.NewLeaseClaims(c.Kube, c.Context).List(ctx, "ct", "", "")
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

// Get implements vdi.CTPools.
func (s *Seam) Get(ctx context.Context, d vdi.DesktopID) (vdi.Claim, error) {
	for _, c := range s.Clusters() {
		cl, err := vdi.NewLeaseClaims(c.Kube, c.Context).Get(ctx, d)
		if errors.Is(err, vdi.ErrNoClaim) {
			continue
		}
		return cl, err
	}
	return vdi.Claim{}, vdi.ErrNoClaim
}

// Member implements vdi.CTPools.
func (s *Seam) Member(ctx context.Context, c vdi.Claim) (string, string, bool) {
	m, cl, err := s.find(ctx, c.Desktop.Namespace, c.Pool)
	if err != nil {
		return "", "Unknown", false
	}
	ref := backends.InstanceRef{Backend: backends.KindKubeVirt, Context: cl.Context, Namespace: c.Desktop.Namespace, Name: c.Desktop.Member}.String()
	o, err := m.member(ctx, c.Pool, c.Desktop.Member)
	if err != nil {
		return ref, "Unknown", false
	}
	st, _ := memberState(o)
	return ref, string(st), st == Ready
}

// Start implements vdi.CTPools.
func (s *Seam) Start(ctx context.Context, c vdi.Claim) error {
	m, _, err := s.find(ctx, c.Desktop.Namespace, c.Pool)
	if err != nil {
		return err
	}
	return m.StartMember(ctx, c.Pool, c.Desktop.Member)
}

// Release implements vdi.CTPools.
func (s *Seam) Release(ctx context.Context, c vdi.Claim) error {
	m, _, err := s.find(ctx, c.Desktop.Namespace, c.Pool)
	if err != nil {
		return err
	}
	r, err := m.Release(ctx, c.Pool, c.Desktop.Member, c.Holder, false)
	if err == nil && !r.Held {
		return backends.Conflictf("desktop %s was released already", c.Desktop)
	}
	return err
}

// Update implements vdi.CTPools.
func (s *Seam) Update(ctx context.Context, c vdi.Claim) (vdi.Claim, error) {
	for _, cl := range s.Clusters() {
		claims := vdi.NewLeaseClaims(cl.Kube, cl.Context)
		if _, err := claims.Get(ctx, c.Desktop); errors.Is(err, vdi.ErrNoClaim) {
			continue
		} else if err != nil {
			return vdi.Claim{}, err
		}
		return claims.Update(ctx, c)
	}
	return vdi.Claim{}, vdi.ErrChanged
}

// Desktop implements vdi.CTPools: ref is a CT member when its context is
// a served cluster and its data PVC carries the member label.
func (s *Seam) Desktop(ctx context.Context, ref backends.InstanceRef) (vdi.DesktopID, bool) {
	if ref.Backend != backends.KindKubeVirt || ref.Namespace == "" || ref.Name == "" {
		return vdi.DesktopID{}, false
	}
	for _, cl := range s.Clusters() {
		if cl.Context != ref.Context {
			continue
		}
		pvc, err := cl.Kube.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, dataPVC(ref.Name), metav1.GetOptions{})
		if err != nil || pvc.Labels[LabelMember] != ref.Name {
			return vdi.DesktopID{}, false
		}
		return vdi.DesktopID{Kind: "ct", Namespace: ref.Namespace, Member: ref.Name}, true
	}
	return vdi.DesktopID{}, false
}
