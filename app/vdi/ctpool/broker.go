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

// find returns the manager of the namespace that holds pool and the
// pool's definition: the one read of its ConfigMap an operation needs.
func (s *Seam) find(ctx context.Context, ns, pool string) (*Manager, Definition, error) {
	for _, c := range s.Clusters() {
		m := s.manager(c, ns)
		if d, err := m.Get(ctx, pool); err == nil {
			return m, d, nil
		} else if !errors.Is(err, backends.ErrNotFound) {
			return nil, Definition{}, err
		}
	}
	return nil, Definition{}, backends.NotFoundf("CT pool %s/%s does not exist", ns, pool)
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
	m, d, err := s.find(ctx, pool.Namespace, pool.Pool)
	if err != nil {
		return vdi.Claim{}, nil, err
	}
	c, err := m.claimIn(ctx, d, holder)
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

// Members implements vdi.CTPools. One claim (a desktop's answer) costs
// its member's PVC and pod; more (a list) cost the lists of the members'
// PVCs and pods of each namespace they are in. Neither reads the pools'
// ConfigMaps: the member's objects say which cluster holds it. A member
// that could not be read (its cluster unreachable, a list refused) has
// the reason in Err, and is never taken for Missing.
func (s *Seam) Members(ctx context.Context, cs []vdi.Claim) []vdi.MemberView {
	clusters := s.Clusters()
	if len(cs) == 1 {
		return []vdi.MemberView{s.memberView(ctx, clusters, cs[0])}
	}
	out := make([]vdi.MemberView, len(cs))
	for i := range out {
		out[i] = vdi.MemberView{Phase: "Unknown"}
	}
	byNS := map[string][]int{}
	for i, c := range cs {
		byNS[c.Desktop.Namespace] = append(byNS[c.Desktop.Namespace], i)
	}
	found := make([]bool, len(cs))
	unread := make([]error, len(cs)) // a cluster that may hold the member could not list it
	for ns, idx := range byNS {
		for _, cl := range clusters {
			objs, err := s.manager(cl, ns).memberObjects(ctx)
			if err != nil {
				s.log().Warn("ctpool: members not listed", "context", cl.Context, "namespace", ns, "err", err)
				for _, i := range idx {
					unread[i] = err
				}
				continue
			}
			for _, i := range idx {
				o, ok := objs[cs[i].Desktop.Member]
				if found[i] || !ok || !o.inPool(cs[i].Pool) {
					continue
				}
				found[i] = true
				out[i] = view(cl, cs[i], o)
			}
		}
	}
	// A member none of the clusters has is Missing where it must be when
	// there is one cluster and it listed the namespace; with several,
	// where is unknown.
	for i := range cs {
		switch {
		case found[i]:
		case unread[i] != nil:
			out[i].Err = unread[i]
		case len(clusters) == 1:
			out[i] = view(clusters[0], cs[i], observed{})
		}
	}
	return out
}

// memberView reads the member of c in each cluster until one has it.
func (s *Seam) memberView(ctx context.Context, clusters []Cluster, c vdi.Claim) vdi.MemberView {
	for _, cl := range clusters {
		o, err := s.manager(cl, c.Desktop.Namespace).member(ctx, c.Pool, c.Desktop.Member)
		if err != nil {
			s.log().Warn("ctpool: member not read", "context", cl.Context, "desktop", c.Desktop.String(), "err", err)
			return vdi.MemberView{Phase: "Unknown", Err: err}
		}
		if o.pvc != nil || o.pod != nil || len(clusters) == 1 {
			return view(cl, c, o)
		}
	}
	return vdi.MemberView{Phase: "Unknown"}
}

func (s *Seam) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// view is what the broker shows of c's member, o, in cluster cl.
func view(cl Cluster, c vdi.Claim, o observed) vdi.MemberView {
	ref := backends.InstanceRef{Backend: backends.KindKubeVirt, Context: cl.Context, Namespace: c.Desktop.Namespace, Name: c.Desktop.Member}.String()
	st, _ := memberState(o)
	return vdi.MemberView{Ref: ref, Phase: string(st), Running: st == Ready}
}

// Start implements vdi.CTPools.
func (s *Seam) Start(ctx context.Context, c vdi.Claim) error {
	m, d, err := s.find(ctx, c.Desktop.Namespace, c.Pool)
	if err != nil {
		return err
	}
	return m.startIn(ctx, d, c.Desktop.Member)
}

// Release implements vdi.CTPools.
func (s *Seam) Release(ctx context.Context, c vdi.Claim) error {
	m, d, err := s.find(ctx, c.Desktop.Namespace, c.Pool)
	if err != nil {
		return err
	}
	r, err := m.releaseIn(ctx, d, c.Desktop.Member, c.Holder, false)
	if err == nil && !r.Held {
		return backends.Conflictf("desktop %s was released already", c.Desktop)
	}
	return err
}

// Update implements vdi.CTPools.
func (s *Seam) Update(ctx context.Context, c vdi.Claim) (vdi.Claim, error) {
	clusters := s.Clusters()
	if len(clusters) == 1 {
		// The Lease can only be there: the update's resourceVersion
		// precondition is the whole check (a missing Lease is ErrChanged).
		return vdi.NewLeaseClaims(clusters[0].Kube, clusters[0].Context).Update(ctx, c)
	}
	// With several clusters, the one holding the Lease is found first.
	for _, cl := range clusters {
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
