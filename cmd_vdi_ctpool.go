package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/app/vdi/ctpool"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/kubevirt"
)

const ctPoolUsage = `usage:
  corral vdi ct-pool apply POOL [-f FILE] [--image IMAGE] [--size N] [--cpu N] [--mem 2Gi]
                                [--disk 5Gi] [--storage-class SC] [--privileged] [--init]
  corral vdi ct-pool reconcile POOL [--watch] [--interval 30s]
  corral vdi ct-pool status POOL
  corral vdi ct-pool list
  corral vdi ct-pool claim POOL IDENTITY
  corral vdi ct-pool release POOL MEMBER IDENTITY [--force]
  corral vdi ct-pool delete POOL
Every command takes -n NAMESPACE (default ` + kubevirt.DefaultNamespace + `) and --context CONTEXT
(a Corral context of the kubevirt backend; without it, kubectl's current context).
apply changes only the fields it is given (a new pool starts from the defaults:
1 CPU, 1Gi memory, 5Gi disk, mode ephemeral) and then reconciles once.`

// ctPoolCmd runs `corral vdi ct-pool`: the CT-backed pools of
// spec/vdi-ct-pools.md, through app/vdi/ctpool.
func ctPoolCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New(ctPoolUsage)
	}
	sub := args[0]
	fs := flag.NewFlagSet("corral vdi ct-pool "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ns := fs.String("n", kubevirt.DefaultNamespace, "the `NAMESPACE` of the pool")
	kctx := fs.String("context", "", "a Corral `CONTEXT` of the kubevirt backend")
	file := fs.String("f", "", "read the definition from `FILE` (YAML or JSON)")
	image := fs.String("image", "", "the member image")
	size := fs.Int("size", 0, "the number of members")
	cpu := fs.Int("cpu", 0, "CPU cores of each member")
	mem := fs.String("mem", "", "memory of each member, e.g. 2Gi")
	disk := fs.String("disk", "", "data PVC size of each member, e.g. 5Gi")
	sc := fs.String("storage-class", "", "the StorageClass of the data PVCs")
	priv := fs.Bool("privileged", false, "privileged members (trusted users only)")
	initFlag := fs.Bool("init", false, "run the image's entrypoint instead of sleep infinity")
	mode := fs.String("mode", "", "ephemeral (the only mode)")
	watch := fs.Bool("watch", false, "keep reconciling: on every change and every --interval")
	interval := fs.Duration("interval", 30*time.Second, "the resync `INTERVAL` of --watch")
	force := fs.Bool("force", false, "release a claim another identity holds (administrators)")
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return fmt.Errorf("%v\n%s", err, ctPoolUsage)
	}
	want := map[string]int{"apply": 1, "reconcile": 1, "status": 1, "list": 0, "claim": 2, "release": 3, "delete": 1}
	n, ok := want[sub]
	if !ok || len(pos) != n {
		return errors.New(ctPoolUsage)
	}
	kube, name, err := ctPoolClient(*kctx)
	if err != nil {
		return err
	}
	m := ctpool.New(kube, ctpool.Options{Context: name, Namespace: *ns,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	switch sub {
	case "apply":
		spec := ctpool.Spec{}
		if d, err := m.Get(ctx, pos[0]); err == nil {
			spec = d.Spec
		} else if !errors.Is(err, backends.ErrNotFound) {
			return err
		}
		if *file != "" {
			data, err := os.ReadFile(*file)
			if err != nil {
				return err
			}
			if spec, err = ctpool.ParseSpec(data); err != nil {
				return err
			}
		}
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "image":
				spec.Image = *image
			case "size":
				spec.Size = *size
			case "cpu":
				spec.CPU = *cpu
			case "mem":
				spec.Memory = *mem
			case "disk":
				spec.Disk = *disk
			case "storage-class":
				spec.StorageClass = *sc
			case "privileged":
				spec.Privileged = *priv
			case "init":
				spec.Init = *initFlag
			case "mode":
				spec.Mode = *mode
			}
		})
		spec, err := m.Apply(ctx, pos[0], spec)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "CT pool %s/%s applied: image %s, size %d, source %s\n", *ns, pos[0], spec.Image, spec.Size, spec.Source())
		res, err := m.Reconcile(ctx, pos[0])
		printReconcile(out, res)
		return err
	case "reconcile":
		if !*watch {
			res, err := m.Reconcile(ctx, pos[0])
			printReconcile(out, res)
			return err
		}
		fmt.Fprintf(out, "watching CT pool %s/%s (resync every %s)\n", *ns, pos[0], *interval)
		return m.Watch(ctx, pos[0], *interval, func(res ctpool.Result, err error) {
			if len(res.Steps) > 0 {
				fmt.Fprintf(out, "%s %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(res.Steps, ", "))
			}
			if err != nil {
				fmt.Fprintf(out, "%s error (retried): %v\n", time.Now().UTC().Format(time.RFC3339), err)
			}
		})
	case "status":
		_, st, err := m.Observe(ctx, pos[0])
		if err != nil {
			return err
		}
		printStatus(out, st)
		return nil
	case "list":
		ds, err := m.List(ctx)
		if err != nil {
			return err
		}
		for _, d := range ds {
			line := fmt.Sprintf("%-24s image %s, size %d", d.Name, d.Spec.Image, d.Spec.Size)
			if d.Status != nil {
				line += fmt.Sprintf(", %d free, %d claimed", d.Status.Free, d.Status.Claimed)
			}
			fmt.Fprintln(out, line)
		}
		return nil
	case "claim":
		c, err := m.Claim(ctx, pos[0], pos[1])
		if err != nil {
			return err
		}
		verb := "claimed"
		if c.Again {
			verb = "already holds"
		}
		fmt.Fprintf(out, "%s %s %s (until %s)\n", pos[1], verb, c.Member, c.Claim.Expires.UTC().Format(time.RFC3339))
		if c.StartError != nil {
			fmt.Fprintf(out, "start failed (the claim stays; reconcile or claim again): %v\n", c.StartError)
		}
		return nil
	case "release":
		r, err := m.Release(ctx, pos[0], pos[1], pos[2], *force)
		if err != nil {
			return err
		}
		switch {
		case !r.Held:
			fmt.Fprintf(out, "%s has no claim: nothing done\n", pos[1])
		case r.Recreated:
			fmt.Fprintf(out, "released %s (held by %s): destroyed and made again from the image\n", pos[1], r.Holder)
		default:
			fmt.Fprintf(out, "released %s (held by %s): destroyed (above the pool size, not made again)\n", pos[1], r.Holder)
		}
		return nil
	case "delete":
		if err := m.Delete(ctx, pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(out, "CT pool %s/%s deleted\n", *ns, pos[0])
		return nil
	}
	return errors.New(ctPoolUsage)
}

// parseInterspersed parses flags placed before, between and after the
// positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// ctPoolClient returns a Kubernetes client: of the Corral context
// (kubevirt/NAME or NAME, a context of CORRAL_KUBECONFIG or
// ~/.kube/config; in-cluster: the pod's ServiceAccount), or of kubectl's
// current context without one.
func ctPoolClient(name string) (kubernetes.Interface, string, error) {
	name = strings.TrimPrefix(name, string(backends.KindKubeVirt)+"/")
	var cfg *rest.Config
	var err error
	switch name {
	case "":
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
		raw, rerr := cc.RawConfig()
		if rerr == nil {
			name = raw.CurrentContext
		}
		cfg, err = cc.ClientConfig()
	case "in-cluster":
		cfg, err = rest.InClusterConfig()
	default:
		path := os.Getenv("CORRAL_KUBECONFIG")
		if path == "" {
			home, _ := os.UserHomeDir()
			path = filepath.Join(home, ".kube", "config")
		}
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
	}
	if err != nil {
		return nil, "", fmt.Errorf("context %q: %w", name, err)
	}
	kube, err := kubernetes.NewForConfig(vdi.ClientConfig(cfg, "corral-vdi-ctpool"))
	return kube, name, err
}

func printReconcile(out io.Writer, res ctpool.Result) {
	if len(res.Steps) == 0 {
		fmt.Fprintln(out, "no change")
	} else {
		fmt.Fprintln(out, strings.Join(res.Steps, "\n"))
	}
	if res.Status.Members != nil {
		printStatus(out, res.Status)
	}
}

func printStatus(out io.Writer, st ctpool.Status) {
	fmt.Fprintf(out, "desired %d, observed %d, ready %d, claimed %d, free %d, unschedulable %d", st.Desired, st.Observed, st.Ready, st.Claimed, st.Free, st.Unschedulable)
	if st.Exhausted {
		fmt.Fprint(out, " (exhausted: no free member)")
	}
	fmt.Fprintln(out)
	for _, m := range st.Members {
		holder := m.Holder
		if m.Expired && holder != "" {
			holder += " (expired)"
		}
		var flags []string
		for _, f := range []struct {
			name string
			on   bool
		}{{"maintenance", m.Maintenance}, {"drift", m.Drift}, {"surplus", m.Surplus}} {
			if f.on {
				flags = append(flags, f.name)
			}
		}
		fmt.Fprintf(out, "  %-24s %-14s %-28s %-24s %s\n", m.Name, m.State, holder, strings.Join(flags, ","), m.Message)
	}
	for _, e := range st.Errors {
		fmt.Fprintf(out, "  error: %s\n", e)
	}
}
