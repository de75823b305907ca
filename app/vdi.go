package app

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
)

// VDIConfig is the desktop broker's configuration (spec/vdi.md).
type VDIConfig struct {
	// Broker serves /api/vdi/ and runs the reclaim policy
	// (CORRAL_VDI_BROKER=1); off, every /api/vdi/ route answers 404.
	Broker bool
	// Grace is the disconnect grace (CORRAL_VDI_DISCONNECT_GRACE, default
	// 15m; 0 turns disconnect reclaim off).
	Grace time.Duration
	// MaxSession is the maximum age of a claim (CORRAL_VDI_MAX_SESSION;
	// default 0: none).
	MaxSession time.Duration
	// Namespaces are the namespaces whose pools the broker serves
	// (CORRAL_VDI_NAMESPACES, comma-separated; default: every pool).
	Namespaces []string
}

// parseVDI reads the CORRAL_VDI_* variables.
func parseVDI(getenv func(string) string) (VDIConfig, error) {
	c := VDIConfig{Grace: vdi.DefaultGrace}
	if v := getenv("CORRAL_VDI_BROKER"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("CORRAL_VDI_BROKER=%q: accepted are 1, 0, true, false", v)
		}
		c.Broker = b
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"CORRAL_VDI_DISCONNECT_GRACE", &c.Grace}, {"CORRAL_VDI_MAX_SESSION", &c.MaxSession}} {
		v := getenv(d.name)
		if v == "" {
			continue
		}
		t, err := time.ParseDuration(v)
		if err != nil || t < 0 {
			return c, fmt.Errorf("%s=%q: accepted is a duration such as 15m or 8h, or 0 for none", d.name, v)
		}
		*d.dst = t
	}
	var err error
	if c.Namespaces, err = vdi.ParseNamespaces(getenv("CORRAL_VDI_NAMESPACES")); err != nil {
		return c, err
	}
	return c, nil
}

// buildVDI builds the VDI core. The CLI uses it whether or not the broker
// is on; `corral serve` mounts the broker and runs its policy only with
// CORRAL_VDI_BROKER=1.
func (a *App) buildVDI() {
	a.VDI = vdi.New(vdi.Options{Fleet: a.Fleet, Tasks: a.Tasks, Store: a.Store, Kube: a.kube,
		Grace: a.cfg.VDI.Grace, MaxSession: a.cfg.VDI.MaxSession, Log: a.log, CT: a.ctPools(a.kube),
		Namespaces: a.cfg.VDI.Namespaces})
}

// vdiBroker returns the broker for the routes, nil when it is off.
func (a *App) vdiBroker() *vdi.Service {
	if !a.cfg.VDI.Broker {
		return nil
	}
	return a.VDI
}

// kubeClients returns the Kubernetes clients of KubeVirt contexts by
// name, built once each from the kubeconfig the contexts come from (or
// the pod's ServiceAccount for "in-cluster"): the VDI's Leases and member
// labels, the CT pools and the in-cluster schedules' CronJobs share them.
func (a *App) kubeClients() vdi.Kube {
	type clients struct {
		kube kubernetes.Interface
		dyn  dynamic.Interface
	}
	var mu sync.Mutex
	cache := map[string]clients{}
	return func(name string) (kubernetes.Interface, dynamic.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		if c, ok := cache[name]; ok {
			return c.kube, c.dyn, nil
		}
		var cfg *rest.Config
		var err error
		if name == "in-cluster" {
			cfg, err = rest.InClusterConfig()
		} else {
			rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: a.cfg.Kubeconfig}
			cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
		}
		if err != nil {
			return nil, nil, fmt.Errorf("app: kubernetes context %s: %w", name, err)
		}
		cfg = vdi.ClientConfig(cfg, "corral")
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, nil, err
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, nil, err
		}
		cache[name] = clients{kube, dyn}
		return kube, dyn, nil
	}
}

// consoleAllow is the console surface's Allow hook while the broker runs
// (spec/vdi.md, private consoles): admins open every console; a signed-in
// person who is not an admin only those of a desktop they hold. A holder's
// console connection (a WebSocket, not the page) is audited as "vdi
// console"; a refusal as any refused request.
func (a *App) consoleAllow(b *vdi.Service) func(ctx context.Context, id auth.Identity, ref backends.InstanceRef) error {
	return func(ctx context.Context, id auth.Identity, ref backends.InstanceRef) error {
		holder, err := b.ConsoleAccess(ctx, id, ref)
		pattern := ""
		if rc := chi.RouteContext(ctx); rc != nil {
			pattern = rc.RoutePattern()
		}
		switch {
		case err != nil && (errors.Is(err, backends.ErrForbidden) || errors.Is(err, backends.ErrConflict)):
			status := "403 "
			if errors.Is(err, backends.ErrConflict) {
				status = "409 "
			}
			a.auditor.Record(ctx, id, "console", "GET "+pattern, ref.String(), auth.OutcomeRefused, status+backends.SafeMessage(err))
		case holder && strings.HasPrefix(pattern, "/ws/"):
			kind := strings.TrimSuffix(strings.TrimPrefix(pattern, "/ws/"), "/*")
			a.auditor.Record(ctx, id, "console", "vdi console ("+kind+")", ref.String(), auth.OutcomeOK, "the desktop's holder opened its "+kind+" console")
		}
		return err
	}
}
