package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/kubevirt"
	"github.com/corral-dev/corral/backends/libvirt"
	"github.com/corral-dev/corral/backends/proxmox"
	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/store"
)

// DemoContexts names the simulated contexts of --demo.
var DemoContexts = []string{"lab", "prod", "edge"}

// addContexts adds the local QEMU context (always present), the demo
// fleet, the contexts stored in the database and those given by flags.
func (a *App) addContexts(ctx context.Context, dataDir string) error {
	// local is always offered: VMs live under the data directory, and a host
	// without QEMU shows the context as unavailable with the reason.
	local, err := qemu.New(qemu.Options{Context: "local", Dir: filepath.Join(dataDir, "vms"), Accel: a.cfg.Accel, Logger: a.log})
	if err != nil {
		return fmt.Errorf("app: local context: %w", err)
	}
	if err := a.Fleet.Add(local); err != nil {
		return err
	}
	if a.cfg.Demo {
		n := len(DemoContexts)
		for i, name := range DemoContexts {
			size := a.cfg.DemoSize / n
			if i < a.cfg.DemoSize%n {
				size++
			}
			if err := a.Fleet.Add(sim.New(sim.Options{Context: name, Size: size})); err != nil {
				return err
			}
		}
		// A real backend beside the simulated ones: libvirt's built-in test
		// driver. Where libvirt is not installed it shows as unavailable.
		a.cfg.Libvirt = append(a.cfg.Libvirt, "demo=test:///default")
	}
	stored, err := a.Store.Contexts(ctx)
	if err != nil {
		return err
	}
	specs := map[string]string{}
	for _, c := range stored {
		switch backends.Kind(c.Backend) {
		case backends.KindLibvirt:
			var conf struct {
				URI string `json:"uri"`
			}
			if err := json.Unmarshal([]byte(c.Config), &conf); err != nil || conf.URI == "" {
				return fmt.Errorf("app: stored context libvirt/%s has no uri", c.Name)
			}
			specs[c.Name] = conf.URI
		case backends.KindProxmox:
			b, err := proxmoxContext(c, a.log)
			if err != nil {
				return err
			}
			if err := a.Fleet.Add(b); err != nil {
				return err
			}
		default:
			a.log.Warn("app: stored context of a backend this server does not build yet", "backend", c.Backend, "name", c.Name)
		}
	}
	for _, l := range a.cfg.Libvirt {
		name, uri, _ := strings.Cut(l, "=")
		specs[name] = uri
	}
	for name, uri := range specs {
		// DataDir holds the disks of domains Corral creates or imports (a
		// move's destination); unused by test:/// and remote URIs.
		b := libvirt.New(libvirt.Options{Context: name, URI: uri, DataDir: filepath.Join(dataDir, "libvirt", name)})
		a.closers = append(a.closers, b.Close)
		if err := a.Fleet.Add(b); err != nil {
			return err
		}
	}
	return a.addKubeVirt()
}

// addKubeVirt offers a KubeVirt context per context of the host's
// kubeconfig (none when the host has no kubeconfig: a context that is
// offered is listed, doctored and reported), and the "in-cluster" context
// when Corral runs in a pod with a ServiceAccount (deploy/kubernetes).
func (a *App) addKubeVirt() error {
	if a.cfg.Kubeconfig != "" {
		names, err := kubevirt.ContextsFromKubeconfig(a.cfg.Kubeconfig)
		switch {
		case errors.Is(err, fs.ErrNotExist): // no kubeconfig on this host
		case err != nil:
			a.log.Warn("app: kubeconfig unreadable; no KubeVirt contexts", "path", a.cfg.Kubeconfig, "err", err)
		default:
			for _, name := range names {
				b, err := kubevirt.New(kubevirt.Options{Context: name, Kubeconfig: a.cfg.Kubeconfig, Logger: a.log})
				if err != nil {
					a.log.Warn("app: KubeVirt context skipped", "context", name, "err", err)
					continue
				}
				if err := a.Fleet.Add(b); err != nil {
					return err
				}
			}
		}
	}
	if rc, err := rest.InClusterConfig(); err == nil {
		b, err := kubevirt.New(kubevirt.Options{Context: "in-cluster", RESTConfig: rc, Logger: a.log})
		if err != nil {
			return err
		}
		return a.Fleet.Add(b)
	}
	return nil
}

// ProxmoxConfig is the stored config of a proxmox context. Secret is the
// API token's secret: it lives only in this row of the database (mode
// 0600), is never logged, and no surface shows it back.
type ProxmoxConfig struct {
	URL      string `json:"url"`     // https://host:8006/api2/json
	TokenID  string `json:"tokenId"` // USER@REALM!ID
	Secret   string `json:"secret"`
	Insecure bool   `json:"insecure"`
}

// proxmoxContext builds the backend of a stored proxmox context. The
// decode error is not wrapped: the config holds the secret.
func proxmoxContext(c store.Context, log *slog.Logger) (*proxmox.Backend, error) {
	var conf ProxmoxConfig
	if err := json.Unmarshal([]byte(c.Config), &conf); err != nil || conf.URL == "" || conf.TokenID == "" || conf.Secret == "" {
		return nil, fmt.Errorf("app: stored context proxmox/%s needs url, tokenId and secret", c.Name)
	}
	return proxmox.New(proxmox.Options{Context: c.Name, URL: conf.URL, TokenID: conf.TokenID, Secret: conf.Secret,
		InsecureTLS: conf.Insecure, Logger: log.With("context", "proxmox/"+c.Name)}), nil
}
