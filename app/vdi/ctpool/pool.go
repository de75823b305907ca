package ctpool

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
)

// Options configure a Manager.
type Options struct {
	// Context names the Corral context (or the kubectl context) in
	// unreachable errors.
	Context string
	// Namespace is where the pools live.
	Namespace string
	// DeleteWait bounds the wait for each deleted pod, Service and PVC;
	// default 2 minutes.
	DeleteWait time.Duration
	// StepLease is how long a reconciler's Lease lasts before the next
	// reconcile may take it over; default 10 minutes.
	StepLease time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// Manager manages the CT pools of one namespace.
type Manager struct {
	kube   kubernetes.Interface
	claims *vdi.LeaseClaims
	opts   Options
}

// New returns a manager of the pools in opts.Namespace.
func New(kube kubernetes.Interface, opts Options) *Manager {
	opts.DeleteWait = cmp.Or(opts.DeleteWait, 2*time.Minute)
	opts.StepLease = cmp.Or(opts.StepLease, 10*time.Minute)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Manager{kube: kube, claims: vdi.NewLeaseClaims(kube, opts.Context), opts: opts}
}

// Namespace returns the namespace of the manager's pools.
func (m *Manager) Namespace() string { return m.opts.Namespace }

// Claims returns the claim store of the members.
func (m *Manager) Claims() vdi.ClaimStore { return m.claims }

func (m *Manager) now() time.Time { return m.opts.Now() }

// fail maps a Kubernetes error of op to a kind of backends/errors.go.
func (m *Manager) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	var be *backends.Error
	if errors.As(err, &be) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return backends.Unavailable(m.opts.Context, err)
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return backends.Unavailable(m.opts.Context, err)
	}
	switch {
	case apierrors.IsForbidden(err):
		return backends.Failed(fmt.Sprintf("%s: the identity may not do this in namespace %s (docs/vdi.md, CT pools, lists the permissions: deploy/kubernetes/rbac.yaml)", op, m.opts.Namespace), err)
	case apierrors.IsNotFound(err):
		return backends.NotFoundf("%s: %s", op, st.Status().Message)
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
		return backends.Conflictf("%s: %s; run it again", op, st.Status().Message)
	case apierrors.IsInvalid(err):
		return backends.Invalidf("%s: the API server refused it: %s", op, st.Status().Message)
	}
	return backends.Failed(op+": the API server failed", err)
}

// Definition is a pool as its ConfigMap holds it.
type Definition struct {
	Name   string
	Spec   Spec
	Status *Status // nil before the first reconcile
	cm     *corev1.ConfigMap
}

// Get reads the definition of pool. A pool without a ConfigMap is
// NotFound; a definition that does not parse is Invalid.
func (m *Manager) Get(ctx context.Context, pool string) (Definition, error) {
	if err := ValidatePoolName(pool); err != nil {
		return Definition{}, err
	}
	cm, err := m.kube.CoreV1().ConfigMaps(m.opts.Namespace).Get(ctx, ConfigMapName(pool), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Definition{}, backends.NotFoundf("CT pool %s does not exist in namespace %s: define it with corral vdi ct-pool apply", pool, m.opts.Namespace)
	}
	if err != nil {
		return Definition{}, m.fail("read CT pool "+pool, err)
	}
	spec, err := ParseSpec([]byte(cm.Data[keySpec]))
	if err != nil {
		return Definition{}, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	d := Definition{Name: pool, Spec: spec.WithDefaults(), cm: cm}
	if raw := cm.Data[keyStatus]; raw != "" {
		var st Status
		if json.Unmarshal([]byte(raw), &st) == nil {
			d.Status = &st
		}
	}
	return d, nil
}

// List returns the pools of the namespace.
func (m *Manager) List(ctx context.Context) ([]Definition, error) {
	list, err := m.kube.CoreV1().ConfigMaps(m.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelPool})
	if err != nil {
		return nil, m.fail("list CT pools", err)
	}
	out := make([]Definition, 0, len(list.Items))
	for i := range list.Items {
		cm := &list.Items[i]
		pool := cm.Labels[LabelPool]
		if cm.Name != ConfigMapName(pool) {
			continue
		}
		spec, err := ParseSpec([]byte(cm.Data[keySpec]))
		if err != nil {
			m.opts.Log.Warn("ctpool: definition skipped", "configmap", cm.Namespace+"/"+cm.Name, "err", err)
			continue
		}
		d := Definition{Name: pool, Spec: spec.WithDefaults(), cm: cm}
		var st Status
		if json.Unmarshal([]byte(cm.Data[keyStatus]), &st) == nil {
			d.Status = &st
		}
		out = append(out, d)
	}
	return out, nil
}

// Apply writes the definition of pool (creating its ConfigMap or
// changing its spec key; the status stays). It does not reconcile.
func (m *Manager) Apply(ctx context.Context, pool string, spec Spec) (Spec, error) {
	if err := ValidatePoolName(pool); err != nil {
		return Spec{}, err
	}
	spec = spec.WithDefaults()
	if err := spec.Validate(pool); err != nil {
		return Spec{}, err
	}
	raw, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return Spec{}, err
	}
	cms := m.kube.CoreV1().ConfigMaps(m.opts.Namespace)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(pool), Namespace: m.opts.Namespace,
			Labels: map[string]string{LabelPool: pool, "app.kubernetes.io/managed-by": "corral"}},
		Data: map[string]string{keySpec: string(raw)},
	}
	_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": cm.Labels}, "data": map[string]string{keySpec: string(raw)}})
		_, err = cms.Patch(ctx, cm.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	}
	if err != nil {
		return Spec{}, m.fail("apply CT pool "+pool, err)
	}
	return spec, nil
}

// writeStatus records st in the pool's ConfigMap when it differs from
// what the ConfigMap holds (a reconcile that changed nothing writes
// nothing).
func (m *Manager) writeStatus(ctx context.Context, d Definition, st Status) error {
	raw, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if d.cm != nil && bytes.Equal([]byte(d.cm.Data[keyStatus]), raw) {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"data": map[string]string{keyStatus: string(raw)}})
	_, err = m.kube.CoreV1().ConfigMaps(m.opts.Namespace).Patch(ctx, ConfigMapName(d.Name), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile
	}
	return m.fail("record the status of CT pool "+d.Name, err)
}

// objects reads the PVCs and pods of pool's members (by the pool label).
func (m *Manager) objects(ctx context.Context, pool string) (map[string]observed, error) {
	sel := labels.Set{LabelPool: pool}.String()
	core := m.kube.CoreV1()
	pvcs, err := core.PersistentVolumeClaims(m.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, m.fail("list the data volumes of CT pool "+pool, err)
	}
	pods, err := core.Pods(m.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, m.fail("list the pods of CT pool "+pool, err)
	}
	return byMember(pvcs.Items, pods.Items), nil
}

// byMember groups members' PVCs and pods by the member label.
func byMember(pvcs []corev1.PersistentVolumeClaim, pods []corev1.Pod) map[string]observed {
	out := map[string]observed{}
	for i := range pvcs {
		p := &pvcs[i]
		name := p.Labels[LabelMember]
		if name == "" {
			continue
		}
		o := out[name]
		o.pvc = p
		out[name] = o
	}
	for i := range pods {
		p := &pods[i]
		name := p.Labels[LabelMember]
		if name == "" || p.Name != name {
			continue
		}
		o := out[name]
		o.pod = p
		out[name] = o
	}
	return out
}

// memberObjects reads the PVCs and pods of every CT pool member of the
// namespace (by the member label), by member name.
func (m *Manager) memberObjects(ctx context.Context) (map[string]observed, error) {
	sel := LabelMember // the label exists
	core := m.kube.CoreV1()
	pvcs, err := core.PersistentVolumeClaims(m.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, m.fail("list the data volumes of the CT pools", err)
	}
	pods, err := core.Pods(m.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, m.fail("list the pods of the CT pools", err)
	}
	return byMember(pvcs.Items, pods.Items), nil
}

// inPool reports whether the member's objects are pool's.
func (o observed) inPool(pool string) bool {
	return o.pvc != nil && o.pvc.Labels[LabelPool] == pool || o.pod != nil && o.pod.Labels[LabelPool] == pool
}

// member reads one member's PVC and pod.
func (m *Manager) member(ctx context.Context, pool, name string) (observed, error) {
	var o observed
	core := m.kube.CoreV1()
	pvc, err := core.PersistentVolumeClaims(m.opts.Namespace).Get(ctx, dataPVC(name), metav1.GetOptions{})
	switch {
	case err == nil && pvc.Labels[LabelPool] == pool:
		o.pvc = pvc
	case err != nil && !apierrors.IsNotFound(err):
		return o, m.fail("read the data volume of member "+name, err)
	}
	pod, err := core.Pods(m.opts.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil && pod.Labels[LabelPool] == pool:
		o.pod = pod
	case err != nil && !apierrors.IsNotFound(err):
		return o, m.fail("read the pod of member "+name, err)
	}
	return o, nil
}

// Observe returns the live status of pool: it changes nothing.
func (m *Manager) Observe(ctx context.Context, pool string) (Definition, Status, error) {
	d, err := m.Get(ctx, pool)
	if err != nil {
		return d, Status{}, err
	}
	st, err := m.observePool(ctx, d)
	return d, st, err
}

func (m *Manager) observePool(ctx context.Context, d Definition) (Status, error) {
	objs, err := m.objects(ctx, d.Name)
	if err != nil {
		return Status{}, err
	}
	claims, err := m.claims.List(ctx, "ct", m.opts.Namespace, d.Name)
	if err != nil {
		return Status{}, err
	}
	return summarize(d.Spec, observe(d.Name, d.Spec, objs, claims, m.now()), nil), nil
}
