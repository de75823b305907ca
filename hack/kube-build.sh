#!/usr/bin/env bash
# Builds kube-apiserver and etcd from the Go module proxy, once, into a
# cache folder keyed by their versions and the Go version (outside the work
# tree, see below), and prints that folder. The KubeVirt, CT and VDI-lease tests run against these binaries
# (a real API server, no kubelet). A cold build takes 10-25 minutes and
# about 2.3 GB of memory; a cached one returns at once.
set -euo pipefail
K8S=v1.37.2          # k8s.io/kubernetes
STAGING=v0.37.2      # the published staging modules of that release
ETCD=v3.7.3          # go.etcd.io/etcd/server/v3 (Debian's 3.4 is too old)
top=$(cd "$(dirname "$0")/.." && pwd)
gov=$(go env GOVERSION)
# The cache lives outside the work tree, so every clone on this machine (CI
# runs in a fresh one) reuses the binaries.
cache=${KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/corral/kube}
out=$cache/$K8S-etcd$ETCD-$gov
if [ -x "$out/kube-apiserver" ] && [ -x "$out/etcd" ]; then echo "$out"; exit 0; fi
# --cached: only report whether the binaries are built (exit 1 if not).
if [ "${1:-}" = "--cached" ]; then exit 1; fi
mkdir -p "$out"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=
(
  cd "$work"
  go mod init corral.local/kubebuild >/dev/null 2>&1
  go mod edit -require=k8s.io/kubernetes@$K8S
  # kubernetes' go.mod replaces its staging modules with ./staging paths,
  # which do not exist in the module download: point each at its release.
  moddir=$(go mod download -json k8s.io/kubernetes@$K8S | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  for m in $(sed -n 's#^\t\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$moddir/go.mod"); do
    case $m in k8s.io/sample-cli-plugin|k8s.io/sample-controller) continue ;; esac
    go mod edit -replace=$m=$m@$STAGING
  done
  go get -tool k8s.io/kubernetes/cmd/kube-apiserver@$K8S >&2
  go build -trimpath -o "$out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2
) 1>&2
(
  cd "$work" && rm -f go.mod go.sum
  go mod init corral.local/etcdbuild >/dev/null 2>&1
  go get go.etcd.io/etcd/server/v3@$ETCD >&2
  go build -trimpath -o "$out/etcd" go.etcd.io/etcd/server/v3 >&2
) 1>&2
echo "$out"
