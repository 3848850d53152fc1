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
  kernel=$(exec uname -r)
  if ! version_at_least "${kernel%%-*}" "$NFTABLES_MIN_KERNEL"; then
    die "datapath nftables needs kernel >= $NFTABLES_MIN_KERNEL, this host runs $kernel (choose an AMI with a newer kernel in network.instance.amiParameter, or another datapath)"
  fi
  log "kernel $kernel >= $NFTABLES_MIN_KERNEL: nftables mode can run"
}

# version_at_least <a> <b>: a >= b, comparing dotted numbers as sort -V does. Plain dotted
# numbers (no leading zeros) are compared by bash, field by field, a shorter one first when the
# fields it has are equal ("5.13" < "5.13.0", sort -V's order); anything else goes to sort -V.
version_at_least() {
  local plain='^(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))*$' a b i
  if [[ "$1" =~ $plain && "$2" =~ $plain ]]; then
    IFS=. read -r -a a <<<"$1"
    IFS=. read -r -a b <<<"$2"
    for ((i = 0; i < ${#a[@]} && i < ${#b[@]}; i++)); do
      if ((a[i] != b[i])); then ((a[i] > b[i])); return; fi
    done
    ((${#a[@]} >= ${#b[@]}))
    return
  fi
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]
}

# kube-proxy's ipvs mode needs the ip_vs modules (docs/facts.md §N2: modprobe ip_vs). One
# `modprobe -a` loads them all (kmod tries every module named and fails if any failed, §N2); only
# when it fails are they loaded one by one, to name the first that is missing: one process on an
# ipvs cell's boot instead of one per module.
load_ipvs_modules() {
  local module
  if ! modprobe -a "${IPVS_MODULES[@]}"; then
    for module in "${IPVS_MODULES[@]}"; do
      modprobe "$module" ||
        die "datapath ipvs needs kernel module $module: 'modprobe $module' failed (install linux-modules-extra for $(exec uname -r), or choose another datapath)"
    done
  fi
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

node_registered() { [ -n "$(exec kubectl get nodes -o name 2>/dev/null)" ]; }

# With --flannel-backend=none K3s leaves containerd's CNI dirs unset (k3s-io/k3s
# pkg/agent/config/config.go, get: CNIBinDir/CNIConfDir are set to its data dir only when flannel
# runs), so containerd falls back to CNI_CONF_DIR and CNI_BIN_DIR, where Cilium installs. Checked
# because it is UNCONFIRMED for K3s 1.36's containerd template (docs/facts.md §N2).
check_cni_dirs() {
  local line dirs='' setting='^[[:space:]]*(bin_dirs?|conf_dir)[[:space:]]*=' conf=0 bin=0
  # Each dir as a pattern on a line, as `grep -q` took it (a dot in the path matches any character).
  local conf_pattern="\"$CNI_CONF_DIR\"" bin_pattern="\"$CNI_BIN_DIR\""
  [ -f "$CONTAINERD_CONFIG" ] || die "K3s wrote no containerd config at $CONTAINERD_CONFIG"
  # The setting lines, each followed by a space (as `grep | tr '\n' ' '` printed them); a file
  # that cannot be read names none, as grep's `|| true` had it.
  while IFS= read -r line || [ -n "$line" ]; do
    if [[ "$line" =~ $setting ]]; then
      dirs+="$line "
      if [[ "$line" =~ $conf_pattern ]]; then conf=1; fi
      if [[ "$line" =~ $bin_pattern ]]; then bin=1; fi
    fi
  done <"$CONTAINERD_CONFIG" || true
  if [ -z "$dirs" ]; then
    log "containerd config names no CNI dirs: containerd's defaults $CNI_CONF_DIR and $CNI_BIN_DIR apply"
    return 0
  fi
  if ((!conf || !bin)); then
    die "with flannel off Cilium installs its CNI into $CNI_CONF_DIR and $CNI_BIN_DIR, but K3s's containerd ($CONTAINERD_CONFIG) uses: $dirs"
  fi
  log "containerd CNI dirs: $dirs"
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

# A command's output is read once, into a variable, and its lines searched by bash: grep, tr and
# a second run of the command for a count were a process each, on every boot. The texts are small
# when the bootstrap reads them (the scale Services come later, from the runner).

# split_lines <text>: the text's lines into TEXT_LINES, split in memory (no globbing; empty lines
# dropped, which none of the patterns here matches).
split_lines() {
  local - IFS=$'\n'
  set -f
  # shellcheck disable=SC2206 # split on newlines on purpose, globbing off
  TEXT_LINES=($1)
}

# first_line <variable> <text> <ERE>: the first line of the text that matches, as grep -m1 -E
# prints it, into the variable; fails (the variable empty) when none does.
first_line() {
  local _line
  printf -v "$1" '%s' ''
  split_lines "$2"
  for _line in "${TEXT_LINES[@]}"; do
    if [[ "$_line" =~ $3 ]]; then
      printf -v "$1" '%s' "$_line"
      return 0
    fi
  done
  return 1
}

# has_line <text> <ERE>: whether a line of the text matches (grep -Eq).
has_line() {
  local line
  first_line line "$1" "$2"
}

# count_lines <variable> <text> <ERE>: how many lines of the text match (grep -c -E), into the variable.
count_lines() {
  local _line _count=0
  split_lines "$2"
  for _line in "${TEXT_LINES[@]}"; do
    if [[ "$_line" =~ $3 ]]; then _count=$((_count + 1)); fi
  done
  printf -v "$1" '%s' "$_count"
}

# The agent runs as container cilium-agent of DaemonSet kube-system/cilium (Cilium chart's
# templates/cilium-agent/daemonset.yaml; seen in rendered manifests, not read at chart 1.20.2).
# cilium_status: its status into CILIUM_STATUS; fails when it did not answer.
cilium_status() { CILIUM_STATUS=$(exec kubectl -n kube-system exec ds/cilium -c cilium-agent -- cilium-dbg status 2>/dev/null); }

# The replacement really happened (docs/facts.md §N2): Cilium says so, and kube-proxy left nothing.
verify_cilium() {
  local replacement rules count
  wait_until "$PROOF_WAIT_SECONDS" cilium_status || die "cilium-dbg status did not answer (kubectl -n kube-system logs ds/cilium)"
  if ! has_line "$CILIUM_STATUS" '^KubeProxyReplacement:[[:space:]]+True'; then
    first_line replacement "$CILIUM_STATUS" '^KubeProxyReplacement' || replacement='no KubeProxyReplacement line'
    die "Cilium does not replace kube-proxy: cilium-dbg status says '$replacement', expected KubeProxyReplacement: True"
  fi
  first_line replacement "$CILIUM_STATUS" '^KubeProxyReplacement'
  if rules=$(exec iptables-save) && [[ "$rules" =~ KUBE-SVC ]]; then
    count_lines count "$rules" 'KUBE-SVC'
    die "kube-proxy rules on a Cilium cell: iptables-save has $count KUBE-SVC line(s) (K3s must run with --disable-kube-proxy)"
  fi
  if nft list table ip kube-proxy >/dev/null 2>&1; then
    die "kube-proxy rules on a Cilium cell: the nft table ip kube-proxy exists (K3s must run with --disable-kube-proxy)"
  fi
  log "$replacement; no KUBE-SVC chain, no kube-proxy nft table"
}

# nat_rules: iptables-save -t nat into NAT_RULES; fails when it fails.
nat_rules() { NAT_RULES=$(exec iptables-save -t nat); }
# kube-proxy's chains appear once it synced the kubernetes Service.
iptables_services() { nat_rules && has_line "$NAT_RULES" '^:KUBE-SERVICES'; }
verify_iptables() {
  local count
  wait_until "$PROOF_WAIT_SECONDS" iptables_services ||
    die "datapath iptables: no KUBE-SERVICES chain in iptables-save -t nat (kube-proxy did not program iptables)"
  count_lines count "$NAT_RULES" '^-A KUBE-'
  log "iptables: $count kube-proxy rule(s) in the nat table"
}

nft_table() { nft list table ip kube-proxy >/dev/null 2>&1; }
verify_nftables() {
  wait_until "$PROOF_WAIT_SECONDS" nft_table || die "datapath nftables: no nft table ip kube-proxy (kube-proxy did not program nftables)"
  if nat_rules && has_line "$NAT_RULES" '^:KUBE-SERVICES'; then
    die "datapath nftables: kube-proxy's iptables chain KUBE-SERVICES exists as well (proxy-mode not nftables)"
  fi
  log "nftables: table ip kube-proxy present, no KUBE-SERVICES iptables chain"
}

# ipvs_services: kube-ipvs0 exists and IPVS_PROC (its text into IPVS_TABLE) lists a virtual service.
ipvs_services() {
  ip link show kube-ipvs0 >/dev/null 2>&1 || return 1
  # A file bash cannot read goes to grep, whose complaint the log shows.
  if [ ! -r "$IPVS_PROC" ]; then
    grep -q '^TCP' "$IPVS_PROC"
    return
  fi
  IFS= read -r -d '' IPVS_TABLE <"$IPVS_PROC" || true
  has_line "$IPVS_TABLE" '^TCP'
}
verify_ipvs() {
  local count
  wait_until "$PROOF_WAIT_SECONDS" ipvs_services ||
    die "datapath ipvs: no kube-ipvs0 interface or no virtual service in $IPVS_PROC (kube-proxy did not program ipvs)"
  count_lines count "$IPVS_TABLE" '^TCP'
  log "ipvs: $count virtual service(s)"
}

# A server-side dry run of a pod in a mesh namespace goes through the mutating webhooks: the
# answer carries istio-proxy only when the injector answered. The API server calls a webhook on a
# dry run only when it declares sideEffects None; istio/istio's
# manifests/charts/istio-control/istio-discovery/templates/mutatingwebhook.yaml does
# (sidecar-injector.istio.io `sideEffects: None`), read at branch release-1.31 (a8d70121), not at a
# 1.31.1 tag (docs/facts.md §N2).
# injected_pod <namespace>
# The pattern cannot span lines, so the whole answer is searched at once (grep -Eq per line).
injected_pod() {
  local pod proxy='"name": *"istio-proxy"'
  pod=$(exec kubectl -n "$1" run lab-injector-probe \
    --image=registry.k8s.io/pause:3.10 --restart=Never --dry-run=server -o json 2>/dev/null) || return 1
  [[ "$pod" =~ $proxy ]]
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
