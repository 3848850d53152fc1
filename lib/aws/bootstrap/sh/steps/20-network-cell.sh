# shellcheck shell=bash
# Steps of a network-lab cell (docs/facts.md §N1, N2): the datapath preflight, K3s with the cell's
# flags, the images, the proof that the datapath is the one the cell claims, and istiod's injector
# on mesh cells. settings.env (lib/aws/bootstrap/cell.ts) gives DATAPATH, MESH_MODE, K3S_EXEC, ...

preflight_datapath() {
  case "$DATAPATH" in
  nftables) check_kernel_for_nftables ;;
  ipvs) load_ipvs_modules ;;
  *) log "datapath $DATAPATH: nothing to check before K3s" ;;
  esac
}

# kube-proxy's nftables mode needs kernel 5.13 or newer (docs/facts.md §N2).
check_kernel_for_nftables() {
  local kernel
  kernel=$(uname -r)
  if ! version_at_least "${kernel%%-*}" "$NFTABLES_MIN_KERNEL"; then
    die "datapath nftables needs kernel >= $NFTABLES_MIN_KERNEL, this host runs $kernel (choose an AMI with a newer kernel in network.instance.amiParameter, or another datapath)"
  fi
  log "kernel $kernel >= $NFTABLES_MIN_KERNEL: nftables mode can run"
}

# version_at_least <a> <b>: a >= b, comparing dotted numbers.
version_at_least() {
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]
}

# kube-proxy's ipvs mode needs the ip_vs modules (docs/facts.md §N2: modprobe ip_vs).
load_ipvs_modules() {
  local module
  for module in "${IPVS_MODULES[@]}"; do
    modprobe "$module" ||
      die "datapath ipvs needs kernel module $module: 'modprobe $module' failed (install linux-modules-extra for $(uname -r), or choose another datapath)"
  done
  log "ipvs modules loaded: ${IPVS_MODULES[*]}"
}

install_cell_k3s() {
  curl -fsSL --retry 5 --max-time 120 -o "$WORK_DIR/k3s-install.sh" https://get.k3s.io ||
    die "cannot download the K3s installer from https://get.k3s.io"
  log "K3s flags: $K3S_EXEC"
  INSTALL_K3S_VERSION="$K3S_VERSION" INSTALL_K3S_EXEC="$K3S_EXEC" within_budget sh "$WORK_DIR/k3s-install.sh"
  k3s --version
  # Without flannel the node stays NotReady until Cilium runs: here only the API must answer.
  wait_until 300 node_registered || die "the K3s API server did not list the node in time (journalctl -u k3s)"
  if [ "$DATAPATH" = cilium ]; then check_cni_dirs; fi
  record_host
}

node_registered() { [ -n "$(kubectl get nodes -o name 2>/dev/null)" ]; }

# With --flannel-backend=none K3s leaves containerd's CNI dirs unset (k3s-io/k3s
# pkg/agent/config/config.go, get: CNIBinDir/CNIConfDir are set to its data dir only when flannel
# runs), so containerd falls back to CNI_CONF_DIR and CNI_BIN_DIR, where Cilium installs. Checked
# because it is UNCONFIRMED for K3s 1.36's containerd template (docs/facts.md §N2).
check_cni_dirs() {
  local dirs
  [ -f "$CONTAINERD_CONFIG" ] || die "K3s wrote no containerd config at $CONTAINERD_CONFIG"
  dirs=$(grep -E '^[[:space:]]*(bin_dirs?|conf_dir)[[:space:]]*=' "$CONTAINERD_CONFIG" || true)
  if [ -z "$dirs" ]; then
    log "containerd config names no CNI dirs: containerd's defaults $CNI_CONF_DIR and $CNI_BIN_DIR apply"
    return 0
  fi
  if ! grep -q "\"$CNI_CONF_DIR\"" <<<"$dirs" || ! grep -q "\"$CNI_BIN_DIR\"" <<<"$dirs"; then
    die "with flannel off Cilium installs its CNI into $CNI_CONF_DIR and $CNI_BIN_DIR, but K3s's containerd ($CONTAINERD_CONFIG) uses: $(tr '\n' ' ' <<<"$dirs")"
  fi
  log "containerd CNI dirs: $(tr '\n' ' ' <<<"$dirs")"
}

pull_cell_images() {
  local image failed=() images=()
  mapfile -t images < <(manifest_images)
  for image in "${images[@]}"; do
    pull_image "$image" || failed+=("$image")
  done
  ((${#failed[@]} == 0)) || die "could not pull: ${failed[*]}"
  log "pulled ${#images[@]} image(s)"
}

verify_datapath() {
  wait_until 300 node_is_ready || die "the node did not become Ready (datapath $DATAPATH; kubectl describe node)"
  case "$DATAPATH" in
  cilium) verify_cilium ;;
  iptables) verify_iptables ;;
  nftables) verify_nftables ;;
  ipvs) verify_ipvs ;;
  *) die "unknown datapath $DATAPATH (settings.env)" ;;
  esac
  READY_SUMMARY="cell $CELL_NAME: datapath $DATAPATH proven, mesh $MESH_MODE"
  log "$READY_SUMMARY"
}

# The agent runs as container cilium-agent of DaemonSet kube-system/cilium (Cilium chart's
# templates/cilium-agent/daemonset.yaml; seen in rendered manifests, not read at chart 1.20.2).
cilium_status() { kubectl -n kube-system exec ds/cilium -c cilium-agent -- cilium-dbg status 2>/dev/null; }

# The replacement really happened (docs/facts.md §N2): Cilium says so, and kube-proxy left nothing.
verify_cilium() {
  local status
  wait_until "$PROOF_WAIT_SECONDS" cilium_status >/dev/null || die "cilium-dbg status did not answer (kubectl -n kube-system logs ds/cilium)"
  status=$(cilium_status)
  grep -Eq '^KubeProxyReplacement:[[:space:]]+True' <<<"$status" ||
    die "Cilium does not replace kube-proxy: cilium-dbg status says '$(grep -m1 '^KubeProxyReplacement' <<<"$status" || echo 'no KubeProxyReplacement line')', expected KubeProxyReplacement: True"
  if output_matches 'KUBE-SVC' iptables-save; then
    die "kube-proxy rules on a Cilium cell: iptables-save has $(iptables-save | grep -c 'KUBE-SVC') KUBE-SVC line(s) (K3s must run with --disable-kube-proxy)"
  fi
  if nft list table ip kube-proxy >/dev/null 2>&1; then
    die "kube-proxy rules on a Cilium cell: the nft table ip kube-proxy exists (K3s must run with --disable-kube-proxy)"
  fi
  log "$(grep -m1 '^KubeProxyReplacement' <<<"$status"); no KUBE-SVC chain, no kube-proxy nft table"
}

# kube-proxy's chains appear once it synced the kubernetes Service.
iptables_services() { output_matches '^:KUBE-SERVICES' iptables-save -t nat; }
verify_iptables() {
  wait_until "$PROOF_WAIT_SECONDS" iptables_services ||
    die "datapath iptables: no KUBE-SERVICES chain in iptables-save -t nat (kube-proxy did not program iptables)"
  log "iptables: $(iptables-save -t nat | grep -c '^-A KUBE-') kube-proxy rule(s) in the nat table"
}

nft_table() { nft list table ip kube-proxy >/dev/null 2>&1; }
verify_nftables() {
  wait_until "$PROOF_WAIT_SECONDS" nft_table || die "datapath nftables: no nft table ip kube-proxy (kube-proxy did not program nftables)"
  if output_matches '^:KUBE-SERVICES' iptables-save -t nat; then
    die "datapath nftables: kube-proxy's iptables chain KUBE-SERVICES exists as well (proxy-mode not nftables)"
  fi
  log "nftables: table ip kube-proxy present, no KUBE-SERVICES iptables chain"
}

ipvs_services() { ip link show kube-ipvs0 >/dev/null 2>&1 && grep -q '^TCP' "$IPVS_PROC"; }
verify_ipvs() {
  wait_until "$PROOF_WAIT_SECONDS" ipvs_services ||
    die "datapath ipvs: no kube-ipvs0 interface or no virtual service in $IPVS_PROC (kube-proxy did not program ipvs)"
  log "ipvs: $(grep -c '^TCP' "$IPVS_PROC") virtual service(s)"
}

# A server-side dry run of a pod in a mesh namespace goes through the mutating webhooks: the
# answer carries istio-proxy only when the injector answered. The API server calls a webhook on a
# dry run only when it declares sideEffects None; istio/istio's
# manifests/charts/istio-control/istio-discovery/templates/mutatingwebhook.yaml does
# (sidecar-injector.istio.io `sideEffects: None`), read at branch release-1.31 (a8d70121), not at a
# 1.31.1 tag (docs/facts.md §N2).
# injected_pod <namespace>
injected_pod() {
  output_matches '"name": *"istio-proxy"' kubectl -n "$1" run lab-injector-probe \
    --image=registry.k8s.io/pause:3.10 --restart=Never --dry-run=server -o json 2>/dev/null
}

# Every mesh namespace: mesh (the policies' arms) and mesh-default (E2's no-policy row), whose
# pods a missing label would leave out of the mesh.
verify_mesh_injector() {
  kubectl -n "$ISTIO_NAMESPACE" rollout status deployment/istiod --timeout="$((BUDGET_LEFT))s" ||
    die "istiod in $ISTIO_NAMESPACE did not become available"
  if [ "$MESH_MODE" = ambient ]; then
    kubectl -n "$ISTIO_NAMESPACE" rollout status daemonset/ztunnel --timeout="$((BUDGET_LEFT))s" ||
      die "ambient mesh: ztunnel in $ISTIO_NAMESPACE did not become ready"
    log "ambient mesh: istiod and ztunnel ready"
    return 0
  fi
  local namespace
  for namespace in "${MESH_NAMESPACES[@]}"; do
    wait_until "$PROOF_WAIT_SECONDS" injected_pod "$namespace" ||
      die "istiod's injector did not answer: a dry-run pod in namespace $namespace got no istio-proxy container (is the namespace labelled istio-injection=enabled?)"
    log "istiod's injector adds istio-proxy to pods in $namespace"
  done
}
