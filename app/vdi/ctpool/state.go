package ctpool

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/app/vdi"
)

// State is a member's state (spec/vdi-ct-pools.md).
type State string

// The member states.
const (
	Missing       State = "Missing"
	Stopped       State = "Stopped"
	Starting      State = "Starting"
	Ready         State = "Ready"
	Unschedulable State = "Unschedulable"
	Failed        State = "Failed"
	Terminating   State = "Terminating"
)

// Member is one row of the pool status.
type Member struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
	State State  `json:"state"`
	// Holder is the claim holder; Expired says the claim expired (it still
	// protects the member).
	Holder  string `json:"holder,omitempty"`
	Expired bool   `json:"expired,omitempty"`
	// Maintenance: the reconciler (or a release) holds the member's Lease.
	Maintenance bool `json:"maintenance,omitempty"`
	// Drift: the member was made from another source than the pool's.
	Drift bool `json:"drift,omitempty"`
	// Surplus: the member's index is above the pool size.
	Surplus bool `json:"surplus,omitempty"`
	// Message is the scheduler's or the pod's message.
	Message string `json:"message,omitempty"`
}

// Claimed reports whether a user holds the member (also an expired claim).
func (m Member) Claimed() bool { return m.Holder != "" }

// Free reports whether a claim may get the member: no Lease, an index in
// the pool size, a current source, and Ready, Starting or Stopped.
func (m Member) Free() bool {
	return !m.Claimed() && !m.Maintenance && !m.Surplus && !m.Drift &&
		(m.State == Ready || m.State == Starting || m.State == Stopped)
}

// Status is the pool status: the ConfigMap's status key.
type Status struct {
	Desired       int      `json:"desired"`
	Observed      int      `json:"observed"`
	Ready         int      `json:"ready"`
	Claimed       int      `json:"claimed"`
	Free          int      `json:"free"`
	Unschedulable int      `json:"unschedulable"`
	Exhausted     bool     `json:"exhausted"`
	Members       []Member `json:"members"`
	Errors        []string `json:"errors,omitempty"`
}

// observed is what a reconcile reads of one member.
type observed struct {
	pvc *corev1.PersistentVolumeClaim
	pod *corev1.Pod
}

// observe returns the rows of the pool's members: every index from 1 to
// the size, and every member that has a PVC, a pod or a claim. claims are
// the pool's Leases.
func observe(pool string, spec Spec, objs map[string]observed, claims []vdi.Claim, now time.Time) []Member {
	names := map[string]bool{}
	for n := 1; n <= spec.Size; n++ {
		names[MemberName(pool, n)] = true
	}
	for name := range objs {
		names[name] = true
	}
	byMember := map[string]vdi.Claim{}
	for _, c := range claims {
		if c.Desktop.Kind == "ct" {
			byMember[c.Desktop.Member] = c
			names[c.Desktop.Member] = true
		}
	}
	src := spec.Source()
	out := make([]Member, 0, len(names))
	for name := range names {
		o := objs[name]
		m := Member{Name: name, Index: memberIndex(pool, name)}
		m.State, m.Message = memberState(o)
		m.Surplus = m.Index < 1 || m.Index > spec.Size
		switch {
		case o.pvc != nil:
			m.Drift = o.pvc.Labels[LabelSource] != src
		case o.pod != nil:
			m.Drift = o.pod.Labels[LabelSource] != src
		}
		if c, ok := byMember[name]; ok {
			m.Expired = c.Expired(now)
			if c.Holder == vdi.ReconcilerIdentity {
				m.Maintenance = true
			} else {
				m.Holder = c.Holder
			}
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int {
		return cmp.Or(cmp.Compare(sortKey(a.Index), sortKey(b.Index)), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// sortKey orders members by index, those without one last.
func sortKey(i int) int {
	if i < 1 {
		return 1 << 30
	}
	return i
}

// memberState derives a member's state from its PVC and pod.
func memberState(o observed) (State, string) {
	switch {
	case o.pvc == nil && o.pod == nil:
		return Missing, ""
	case o.pvc != nil && o.pvc.DeletionTimestamp != nil, o.pod != nil && o.pod.DeletionTimestamp != nil:
		return Terminating, ""
	case o.pod == nil:
		return Stopped, ""
	case o.pvc == nil:
		return Failed, "the member's data volume is missing"
	}
	p := o.pod
	switch p.Status.Phase {
	case corev1.PodFailed:
		return Failed, cmp.Or(p.Status.Message, p.Status.Reason, "the pod failed")
	case corev1.PodSucceeded:
		return Stopped, "the pod ended"
	case corev1.PodRunning:
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse {
				return Starting, c.Message
			}
		}
		return Ready, ""
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return Unschedulable, c.Message
		}
	}
	return Starting, ""
}

// Action is what a reconcile does to one member.
type Action string

// The reconciler's actions.
const (
	None    Action = ""
	Create  Action = "create"
	Start   Action = "start"
	Replace Action = "replace"
	Delete  Action = "delete"
)

// plan returns the action of a reconcile on m. A member a user claimed
// (also an expired claim) is never touched, nor one whose Lease another
// reconciler holds and has not let expire.
func plan(m Member) Action {
	if m.Claimed() || m.Maintenance && !m.Expired {
		return None
	}
	switch {
	case m.Surplus:
		if m.State == Missing || m.State == Terminating {
			return None
		}
		return Delete
	case m.State == Missing:
		return Create
	case m.State == Terminating:
		return None // a delete in progress; the next reconcile creates it
	case m.State == Failed || m.Drift:
		return Replace
	case m.State == Stopped:
		return Start
	}
	return None
}

// summarize counts the rows into a status.
func summarize(spec Spec, members []Member, errs []string) Status {
	st := Status{Desired: spec.Size, Members: members, Errors: errs}
	if st.Members == nil {
		st.Members = []Member{}
	}
	for _, m := range members {
		if m.State != Missing {
			st.Observed++
		}
		if m.State == Ready {
			st.Ready++
		}
		if m.Claimed() {
			st.Claimed++
		}
		if m.Free() {
			st.Free++
		}
		if m.State == Unschedulable {
			st.Unschedulable++
		}
	}
	st.Exhausted = st.Observed > 0 && st.Free == 0
	return st
}
