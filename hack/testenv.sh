#!/usr/bin/env bash
# Runs a command against a real Kubernetes API server: builds (or reuses)
# kube-apiserver and etcd with hack/kube-build.sh, starts both on loopback
# with a temporary data folder, installs the KubeVirt and CDI CRDs from
# hack/crds/, writes a kubeconfig, exports TEST_KUBECONFIG, runs the
# command, and stops both. Tests read TEST_KUBECONFIG, never KUBECONFIG, so
# they cannot touch a real cluster.
#
#   hack/testenv.sh go test ./backends/kubevirt/...
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$("$top/hack/kube-build.sh")
w=$(mktemp -d /tmp/corral-testenv.XXXXXX)
pids=()
# Stop the API server before etcd (an API server whose etcd is gone
# retries for minutes before it exits), give both two seconds, then kill
# them: their data is thrown away anyway.
cleanup() {
  local i p
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  for i in $(seq 1 8); do
    alive=
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ -z "$alive" ] && break
    sleep 0.25
  done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$w"
}
trap cleanup EXIT

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
etcd_port=$(freeport); peer_port=$(freeport); api_port=$(freeport)
start=$(date +%s.%N)

"$bin/etcd" --data-dir "$w/etcd" --unsafe-no-fsync \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "default=http://127.0.0.1:$peer_port" --name default >"$w/etcd.log" 2>&1 &
pids+=($!)

token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$token,corral-test,corral-test,system:masters" >"$w/tokens.csv"
openssl genrsa -out "$w/sa.key" 2048 2>/dev/null
# The ports are probed free and then bound by another process, so a test
# running beside this script can take one first: a kube-apiserver that
# exits with "address already in use" is started again on another port.
start_apiserver() {
  api_port=$(freeport)
  "$bin/kube-apiserver" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
    --endpoint-reconciler-type=none --etcd-servers="http://127.0.0.1:$etcd_port" \
    --cert-dir="$w/certs" --token-auth-file="$w/tokens.csv" --authorization-mode=RBAC \
    --service-account-key-file="$w/sa.key" --service-account-signing-key-file="$w/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc --service-cluster-ip-range=10.0.0.0/24 \
    --disable-admission-plugins=ServiceAccount,StorageObjectInUseProtection --allow-privileged=true >"$w/apiserver.log" 2>&1 &
  apipid=$!
  pids+=($apipid)
  api="https://127.0.0.1:$api_port"
}
start_apiserver
tries=1
ready=
for i in $(seq 1 240); do
  if curl -fsk -H "Authorization: Bearer $token" "$api/readyz" >/dev/null 2>&1; then ready=1; break; fi
  if ! kill -0 "$apipid" 2>/dev/null; then
    if [ "$tries" -lt 3 ] && grep -q "address already in use" "$w/apiserver.log"; then
      echo "testenv: port $api_port was taken meanwhile; starting kube-apiserver on another" >&2
      tries=$((tries + 1)); start_apiserver; continue
    fi
    echo "testenv: kube-apiserver exited:" >&2; tail -20 "$w/apiserver.log" >&2; exit 1
  fi
  sleep 0.25
done
if [ -z "$ready" ]; then echo "testenv: kube-apiserver not ready after 60 s:" >&2; tail -20 "$w/apiserver.log" >&2; exit 1; fi
cat >"$w/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "https://127.0.0.1:$api_port", insecure-skip-tls-verify: true}}]
users: [{name: test, user: {token: "$token"}}]
contexts: [{name: test, context: {cluster: test, user: test}}]
current-context: test
KC
crds=()
for f in "$top"/hack/crds/*.yaml; do
  [ -e "$f" ] || continue
  # A CRD is applied with a plain POST (no kubectl here): YAML in, as the
  # API server accepts application/yaml.
  if ! curl -fsSk -H "Authorization: Bearer $token" -H "Content-Type: application/yaml" \
    --data-binary @"$f" "$api/apis/apiextensions.k8s.io/v1/customresourcedefinitions" -o "$w/crd.out"; then
    echo "testenv: the API server refused $f:" >&2; cat "$w/crd.out" >&2; exit 1
  fi
  crds+=("$(sed -n 's/^  name: *//p' "$f" | head -1)")
done
# A CRD is served only once it is Established (a moment after the POST):
# wait for every one, so the first test does not meet a 404.
for c in "${crds[@]}"; do
  for i in $(seq 1 120); do
    if curl -fsk -H "Authorization: Bearer $token" "$api/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$c" |
      python3 -c 'import json,sys; sys.exit(0 if any(x["type"]=="Established" and x["status"]=="True" for x in json.load(sys.stdin).get("status",{}).get("conditions",[])) else 1)'; then
      break
    fi
    if [ "$i" = 120 ]; then echo "testenv: CRD $c not established after 30 s" >&2; exit 1; fi
    sleep 0.25
  done
done
export TEST_KUBECONFIG="$w/kubeconfig"
echo "testenv: API server on 127.0.0.1:$api_port with ${#crds[@]} CRDs, ready in $(python3 -c "import time; print(round(time.time()-$start, 1))") s (TEST_KUBECONFIG=$TEST_KUBECONFIG)" >&2
"$@"
