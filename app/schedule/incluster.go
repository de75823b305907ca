package schedule

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// CronJobs makes and removes the Kubernetes CronJob of an in-cluster
// schedule.
type CronJobs interface {
	// Apply creates or updates the CronJob of sc (suspended when sc is
	// disabled) in ref's namespace.
	Apply(ctx context.Context, sc store.Schedule, ref backends.InstanceRef) error
	// Delete deletes it; a CronJob that is gone already is not an error.
	Delete(ctx context.Context, sc store.Schedule, ref backends.InstanceRef) error
}

// Labels and names of what KubeCronJobs makes.
const (
	LabelSchedule    = "corral.dev/schedule"
	LabelVM          = "corral.dev/vm"
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	SchedulerAccount = "corral-scheduler"
	// DefaultImage runs the CronJob's one command, a curl PATCH of the
	// VM's run strategy; pinned so every cluster runs the same bytes.
	DefaultImage = "docker.io/curlimages/curl:8.11.1"
)

// KubeCronJobs is CronJobs on the clusters of KubeVirt contexts.
//
// Each in-cluster schedule is one batch/v1 CronJob named
// corral-schedule-ID in the VM's namespace, with the schedule's cron
// expression and .spec.timeZone. Its pod runs curl (Image) as the
// ServiceAccount corral-scheduler, whose Role may only get and patch
// VirtualMachines in that namespace, and sends one merge patch of
// spec.runStrategy: Always for start, Halted for stop and shutdown.
// KubeVirt's VM controller then stops the guest gracefully either way:
// unlike Corral's own stop, the job does not force-delete the VMI. The
// ServiceAccount, Role and RoleBinding are created on first use and kept
// (other schedules of the namespace share them). Corral's own credentials
// therefore need create on cronjobs, serviceaccounts, roles and
// rolebindings in the VMs' namespaces (deploy/kubernetes/rbac.yaml).
//
// Why curl and not Corral's binary: the job needs one authenticated HTTP
// request, and a 10 MB public image that does only that is smaller to
// audit and to pull than a Corral image with credentials for every
// backend. The image is a setting for clusters that mirror images.
type KubeCronJobs struct {
	// Clients returns the clientset of a KubeVirt context by name.
	Clients func(contextName string) (kubernetes.Interface, error)
	// Image is the job's image; empty means DefaultImage.
	Image string
	// StartingDeadline is how late the CronJob controller may still
	// start a missed job; zero means 10 minutes (the tick's grace).
	StartingDeadline time.Duration
}

// CronJobName returns the name of the CronJob of schedule id.
func CronJobName(id int64) string { return "corral-schedule-" + strconv.FormatInt(id, 10) }

// runStrategy is what a power action sets.
func runStrategy(action string) string {
	if action == "start" {
		return "Always"
	}
	return "Halted"
}

// script is the job's command: one PATCH with the pod's ServiceAccount
// token, to the API server the pod's environment names.
const script = `set -eu
sa=/var/run/secrets/kubernetes.io/serviceaccount
curl -sS --fail-with-body --retry 3 --cacert "$sa/ca.crt" \
  -H "Authorization: Bearer $(cat "$sa/token")" \
  -H 'Content-Type: application/merge-patch+json' -X PATCH \
  --data "{\"spec\":{\"runStrategy\":\"$RUN_STRATEGY\"}}" \
  "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/apis/kubevirt.io/v1/namespaces/$VM_NAMESPACE/virtualmachines/$VM_NAME"
`

// CronJob returns the CronJob of sc for ref.
func (k *KubeCronJobs) CronJob(sc store.Schedule, ref backends.InstanceRef) *batchv1.CronJob {
	image := k.Image
	if image == "" {
		image = DefaultImage
	}
	deadline := int64(k.StartingDeadline / time.Second)
	if deadline <= 0 {
		deadline = 600
	}
	labels := map[string]string{LabelManagedBy: "corral", LabelVM: ref.Name, LabelSchedule: strconv.FormatInt(sc.ID, 10)}
	tz := sc.TZ
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: CronJobName(sc.ID), Namespace: ref.Namespace, Labels: labels,
			Annotations: map[string]string{"corral.dev/action": sc.Action, "corral.dev/created-by": sc.CreatedBy}},
		Spec: batchv1.CronJobSpec{
			Schedule:                   sc.Cron,
			TimeZone:                   &tz,
			Suspend:                    ptr.To(!sc.Enabled),
			ConcurrencyPolicy:          batchv1.ForbidConcurrent,
			StartingDeadlineSeconds:    &deadline,
			SuccessfulJobsHistoryLimit: ptr.To(int32(1)),
			FailedJobsHistoryLimit:     ptr.To(int32(3)),
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: batchv1.JobSpec{
					BackoffLimit:            ptr.To(int32(2)),
					TTLSecondsAfterFinished: ptr.To(int32(86400)),
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{
							ServiceAccountName: SchedulerAccount,
							RestartPolicy:      corev1.RestartPolicyNever,
							SecurityContext:    &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65534))},
							Containers: []corev1.Container{{
								Name:    "power",
								Image:   image,
								Command: []string{"sh", "-c", script},
								Env: []corev1.EnvVar{
									{Name: "VM_NAMESPACE", Value: ref.Namespace},
									{Name: "VM_NAME", Value: ref.Name},
									{Name: "RUN_STRATEGY", Value: runStrategy(sc.Action)},
								},
								SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
									Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
							}},
						},
					},
				},
			},
		},
	}
}

// Apply implements CronJobs.
func (k *KubeCronJobs) Apply(ctx context.Context, sc store.Schedule, ref backends.InstanceRef) error {
	kc, err := k.Clients(ref.Context)
	if err != nil {
		return backends.Unavailable(ref.ContextKey(), err)
	}
	if err := k.ensureAccount(ctx, kc, ref); err != nil {
		return err
	}
	want := k.CronJob(sc, ref)
	what := "CronJob " + ref.Namespace + "/" + want.Name
	cjs := kc.BatchV1().CronJobs(ref.Namespace)
	_, err = cjs.Create(ctx, want, metav1.CreateOptions{FieldManager: "corral"})
	if apierrors.IsAlreadyExists(err) {
		var cur *batchv1.CronJob
		if cur, err = cjs.Get(ctx, want.Name, metav1.GetOptions{}); err == nil {
			cur.Labels, cur.Annotations, cur.Spec = want.Labels, want.Annotations, want.Spec
			_, err = cjs.Update(ctx, cur, metav1.UpdateOptions{FieldManager: "corral"})
		}
	}
	return kubeError(ref, "create", what, err)
}

// Delete implements CronJobs.
func (k *KubeCronJobs) Delete(ctx context.Context, sc store.Schedule, ref backends.InstanceRef) error {
	kc, err := k.Clients(ref.Context)
	if err != nil {
		return backends.Unavailable(ref.ContextKey(), err)
	}
	name := CronJobName(sc.ID)
	err = kc.BatchV1().CronJobs(ref.Namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return kubeError(ref, "delete", "CronJob "+ref.Namespace+"/"+name, err)
}

// ensureAccount creates the job's ServiceAccount, its Role (get and patch
// VirtualMachines, nothing else) and their RoleBinding in ref's namespace
// when they are missing.
func (k *KubeCronJobs) ensureAccount(ctx context.Context, kc kubernetes.Interface, ref backends.InstanceRef) error {
	ns := ref.Namespace
	meta := metav1.ObjectMeta{Name: SchedulerAccount, Namespace: ns, Labels: map[string]string{LabelManagedBy: "corral"}}
	_, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{})
	if err == nil || apierrors.IsAlreadyExists(err) {
		_, err = kc.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines"}, Verbs: []string{"get", "patch"},
		}}}, metav1.CreateOptions{})
	}
	if err == nil || apierrors.IsAlreadyExists(err) {
		_, err = kc.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta,
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: SchedulerAccount, Namespace: ns}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: SchedulerAccount},
		}, metav1.CreateOptions{})
	}
	if apierrors.IsAlreadyExists(err) {
		err = nil
	}
	return kubeError(ref, "create", "the scheduler's ServiceAccount in namespace "+ns, err)
}

// kubeError maps a client-go error onto the shared kinds with a message
// naming only the context and the object; the API server's text (users,
// URLs) goes to the log as the cause.
func kubeError(ref backends.InstanceRef, op, what string, err error) error {
	if err == nil {
		return nil
	}
	wrap := func(kind error, format string, args ...any) error {
		return &backends.Error{Kind: kind, Msg: fmt.Sprintf(format, args...), Err: err}
	}
	key := ref.ContextKey()
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return wrap(backends.ErrForbidden, "the credentials of context %s may not %s %s: grant them (deploy/kubernetes/rbac.yaml) or schedule locally", key, op, what)
	case apierrors.IsNotFound(err):
		return wrap(backends.ErrInvalid, "namespace %s does not exist in context %s", ref.Namespace, key)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return wrap(backends.ErrInvalid, "context %s refused the %s: its API server does not accept this schedule", key, what)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		apierrors.IsServiceUnavailable(err), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err):
		return backends.Unavailable(key, err)
	case apierrors.ReasonForError(err) == metav1.StatusReasonUnknown:
		// Not an API status at all: the transport failed.
		return backends.Unavailable(key, err)
	}
	return wrap(backends.ErrFailed, "context %s failed to %s %s", key, op, what)
}

// checkInCluster refuses what the in-cluster path cannot do.
func (s *Service) checkInCluster(sc store.Schedule) error {
	if sc.TargetKind != TargetInstance {
		return backends.Invalidf("an in-cluster schedule targets one KubeVirt instance, not a folder: leave inCluster off to schedule a folder")
	}
	if sc.Kind != KindPower {
		return backends.Invalidf("an in-cluster schedule is a power schedule: snapshot schedules run on the local tick (leave inCluster off)")
	}
	ref, err := backends.ParseRef(sc.Target)
	if err != nil {
		return err
	}
	if ref.Backend != backends.KindKubeVirt || ref.Peer != "" {
		return backends.Refuse(ref.Backend, "in-cluster scheduling", "only a KubeVirt cluster has a CronJob controller: leave inCluster off to schedule it on the local tick")
	}
	if s.opts.CronJobs == nil {
		return backends.Refuse(ref.Backend, "in-cluster scheduling", "this server has no access to the cluster's CronJobs: run it with the context's kubeconfig")
	}
	return nil
}

func (s *Service) applyCronJob(ctx context.Context, sc store.Schedule) error {
	ref, err := backends.ParseRef(sc.Target)
	if err != nil {
		return err
	}
	if s.opts.CronJobs == nil {
		return backends.Refuse(ref.Backend, "in-cluster scheduling", "this server has no access to the cluster's CronJobs")
	}
	return s.opts.CronJobs.Apply(ctx, sc, ref)
}

func (s *Service) deleteCronJob(ctx context.Context, sc store.Schedule) error {
	ref, err := backends.ParseRef(sc.Target)
	if err != nil {
		return err
	}
	if s.opts.CronJobs == nil {
		return backends.Refuse(ref.Backend, "in-cluster scheduling", "this server has no access to the cluster's CronJobs: delete the CronJob "+CronJobName(sc.ID)+" with kubectl")
	}
	return s.opts.CronJobs.Delete(ctx, sc, ref)
}
