// Package kubevirt is the backend for KubeVirt contexts: one Kubernetes
// cluster reached through one kubeconfig context (or an in-cluster
// rest.Config), whose VirtualMachines are Corral's instances.
//
// It speaks to the API server with k8s.io/client-go only: the typed
// clientset for core objects (namespaces, secrets, PVCs) and the dynamic
// client for KubeVirt's and CDI's custom resources, read and written as
// unstructured objects through the small helpers in object.go. It never
// runs kubectl or virtctl, and it does not import kubevirt.io/api, whose
// dependency tree is larger than the rest of Corral.
//
// What Corral keeps about an instance lives on the VirtualMachine itself:
// tags are labels (corral.dev/tag.NAME), the Proxmox vmid is the label
// corral.io/proxmox-vmid, objects made for a VM carry corral.dev/vm=NAME
// so Delete can find them (no garbage collector is assumed: the backend
// deletes each object it made, which is also correct on a real cluster).
//
// Power goes through spec.runStrategy (start = Always, stop and shutdown =
// Halted), restart deletes the VirtualMachineInstance so the VM controller
// starts a new one, and pause/resume call KubeVirt's aggregated
// subresources.kubevirt.io API; a cluster that does not serve it (no
// virt-api) gets a refusal naming virtctl. See power.go.
package kubevirt

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/backends"
)

var (
	_ backends.Backend     = (*Backend)(nil)
	_ backends.Snapshotter = (*Backend)(nil)
	_ backends.Cloner      = (*Backend)(nil)
	_ backends.Tagger      = (*Backend)(nil)
	_ backends.Doctor      = (*Backend)(nil)
	_ backends.Watcher     = (*Backend)(nil)
)

// DefaultNamespace is where Create puts a VM whose spec names no
// namespace, unless Options.Namespace says otherwise.
const DefaultNamespace = "corral-vms"

// Labels and annotations Corral reads and writes.
const (
	labelVMID      = "corral.io/proxmox-vmid" // the Proxmox vmid, DESIGN.md section 4
	labelTagPrefix = "corral.dev/tag."        // one label per tag, value "true"
	labelVM        = "corral.dev/vm"          // objects made for the VM of that name
	labelSnapshot  = "corral.dev/snapshot"    // the snapshot's name as the caller gave it
	annConsistency = "corral.dev/consistency" // consistency judged when the snapshot was taken
	annDiskMiB     = "corral.dev/disk-mib"    // size of the disk Corral created
	fieldManager   = "corral"
)

// The resources of KubeVirt and CDI the backend uses.
var (
	gvrVM       = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
	gvrVMI      = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
	gvrSnapshot = schema.GroupVersionResource{Group: "snapshot.kubevirt.io", Version: "v1beta1", Resource: "virtualmachinesnapshots"}
	gvrRestore  = schema.GroupVersionResource{Group: "snapshot.kubevirt.io", Version: "v1beta1", Resource: "virtualmachinerestores"}
	gvrClone    = schema.GroupVersionResource{Group: "clone.kubevirt.io", Version: "v1beta1", Resource: "virtualmachineclones"}
	gvrDV       = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes"}
)

// Options configure one KubeVirt context.
type Options struct {
	// Context is the kubeconfig context to use and the context name in
	// references ("kubevirt/CONTEXT/NAMESPACE/NAME"). With RESTConfig it
	// is only the name.
	Context string
	// Kubeconfig is the path of the kubeconfig file. It is read, never
	// written: Corral does not change kubectl's state.
	Kubeconfig string
	// RESTConfig, when set, is used instead of Kubeconfig (for example
	// rest.InClusterConfig() when Corral runs in the cluster).
	RESTConfig *rest.Config
	// Namespace is where Create puts a VM whose spec names none;
	// empty means DefaultNamespace.
	Namespace string
	// Wait bounds how long snapshot, revert and clone wait for KubeVirt's
	// controllers when the caller's context has no deadline; zero means
	// five minutes, KubeVirt's own snapshot failure deadline.
	Wait time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives what an operator may want to know; nil discards.
	Logger *slog.Logger
}

// Backend is one KubeVirt context. It is safe for concurrent use; it holds
// clients, which connect on each call, and no inventory of its own.
type Backend struct {
	opts Options
	kube kubernetes.Interface
	dyn  dynamic.Interface
	cfg  *rest.Config // for the exec streams of CT consoles
}

// New returns a backend for opts. It reads the kubeconfig but does not
// connect, so a cluster that is down makes the context unavailable
// rather than failing the constructor.
func New(opts Options) (*Backend, error) {
	if opts.Context == "" {
		return nil, errors.New("kubevirt: a context name is required")
	}
	opts.Namespace = cmp.Or(opts.Namespace, DefaultNamespace)
	opts.Wait = cmp.Or(opts.Wait, 5*time.Minute)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg := opts.RESTConfig
	if cfg == nil {
		if opts.Kubeconfig == "" {
			return nil, errors.New("kubevirt: a kubeconfig path or a REST config is required")
		}
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: opts.Kubeconfig}
		over := &clientcmd.ConfigOverrides{CurrentContext: opts.Context}
		c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, over).ClientConfig()
		if err != nil {
			// clientcmd's text names the file and the context, never a
			// credential.
			return nil, fmt.Errorf("kubevirt: context %s: %w", opts.Context, err)
		}
		cfg = c
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "corral"
	// client-go's default of 5 requests a second (and the 50 with a burst
	// of 100 this set before) throttles a burst of actions in this
	// process: a bulk start of a folder, or 100 desktops claimed at once,
	// each a few requests, waited 8 s for the client's own limiter
	// (docs/performance.md, VDI claims). The API server's priority and
	// fairness is what protects it from a client.
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 500, 1000
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubevirt: context %s: %w", opts.Context, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubevirt: context %s: %w", opts.Context, err)
	}
	return &Backend{opts: opts, kube: kube, dyn: dyn, cfg: cfg}, nil
}

// ContextsFromKubeconfig returns the names of the contexts in the
// kubeconfig at path, sorted. It returns an error wrapping fs.ErrNotExist
// when there is no file, which callers take as "this host has no
// kubeconfig" and then offer no KubeVirt context at all.
func ContextsFromKubeconfig(path string) ([]string, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubevirt: read kubeconfig: %w", err)
	}
	names := make([]string, 0, len(cfg.Contexts))
	for name := range cfg.Contexts {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// Kind implements backends.Backend.
func (b *Backend) Kind() backends.Kind { return backends.KindKubeVirt }

// Context implements backends.Backend.
func (b *Backend) Context() string { return b.opts.Context }

func (b *Backend) ref(namespace, name string) backends.InstanceRef {
	return backends.InstanceRef{Backend: backends.KindKubeVirt, Context: b.opts.Context, Namespace: namespace, Name: name}
}

// check returns NotFound unless ref names an instance of this context.
// Names are not checked against backends.ValidateName: VMs made outside
// Corral may use any name Kubernetes accepts and must stay reachable.
func (b *Backend) check(ref backends.InstanceRef) error {
	if ref.Backend != backends.KindKubeVirt || ref.Context != b.opts.Context || ref.Peer != "" || ref.Namespace == "" || ref.Name == "" {
		return backends.NotFoundf("instance %s is not in context %s", ref, b.opts.Context)
	}
	return nil
}

// fail maps err of op on what to a shared kind.
func (b *Backend) fail(op, what string, err error) error {
	return mapError(b.opts.Context, op, what, err)
}
