# shellcheck shell=bash
# Step: K3s, pinned, with the NVIDIA runtime in its containerd and the RuntimeClass.
#
# Why the containerd config is checked: K3s creates RuntimeClasses nvidia and nvidia-experimental
# from a static manifest whether or not it found the runtime, so `kubectl get runtimeclass nvidia`
# proves nothing. What proves it is the config K3s generates for its containerd at
# <data-dir>/agent/etc/containerd/config.toml (k3s-io/k3s pkg/agent/config/config.go, get:
# nodeConfig.Containerd.Config): it holds a runtimes table "nvidia" with BinaryName
# .../nvidia-container-runtime only when K3s found the binary at start
# (pkg/agent/containerd/nvidia.go, findNvidiaContainerRuntimes; rendered from ExtraRuntimes by
# pkg/agent/templates). Both config versions match: runtimes."nvidia" and runtimes.'nvidia'.

install_k3s() {
  # With agents K3s starts with --agent-token-file: the file must be there first (30-cluster.sh).
  if ((${#AGENT_HOSTS[@]} > 0)); then fetch_agent_token; fi
  # The installer is get.k3s.io's; the K3s release it installs is pinned by INSTALL_K3S_VERSION.
  curl -fsSL --retry 5 --max-time 120 -o "$WORK_DIR/k3s-install.sh" https://get.k3s.io ||
    die "cannot download the K3s installer from https://get.k3s.io"
  INSTALL_K3S_VERSION="$K3S_VERSION" INSTALL_K3S_EXEC="$K3S_EXEC" within_budget sh "$WORK_DIR/k3s-install.sh"
  # To the log, and kept for host.json (record_host): one k3s start instead of two.
  K3S_VERSION_OUTPUT=$(exec k3s --version)
  printf '%s\n' "$K3S_VERSION_OUTPUT"
  wait_until 300 node_is_ready || die "the K3s node did not become Ready in time (journalctl -u k3s)"
  # K3s writes the config before it starts containerd, so a Ready node has it in full.
  nvidia_runtime_configured ||
    die "K3s's containerd has no nvidia runtime: $CONTAINERD_CONFIG lacks a runtimes \"nvidia\" table with BinaryName .../nvidia-container-runtime, so K3s did not find nvidia-container-runtime when it started (its RuntimeClass $RUNTIME_CLASS exists either way)"
  log "containerd runtime nvidia: $NVIDIA_BINARY_LINE"
  wait_until 120 runtime_class_exists || die "RuntimeClass $RUNTIME_CLASS missing 2 minutes after K3s started"
  kubectl get runtimeclass
  record_host
}

# The generated containerd config has the nvidia runtime and its binary: a line matching each
# ERE, as `grep -Eq` matched them (read by bash itself: grep was three processes with the log's).
# NVIDIA_BINARY_LINE: the first line naming the binary, for the log.
nvidia_runtime_configured() {
  local line table='' binary=''
  local table_re="containerd\.runtimes\.[\"']?nvidia[\"']?\]"
  local binary_re='BinaryName *= *"[^"]*/nvidia-container-runtime"'
  local logged_re='BinaryName *= *"[^"]*nvidia-container-runtime"'
  NVIDIA_BINARY_LINE=''
  [ -f "$CONTAINERD_CONFIG" ] || return 1
  while IFS= read -r line || [ -n "$line" ]; do
    if [[ "$line" =~ $table_re ]]; then table=1; fi
    if [[ "$line" =~ $binary_re ]]; then binary=1; fi
    if [ -z "$NVIDIA_BINARY_LINE" ] && [[ "$line" =~ $logged_re ]]; then NVIDIA_BINARY_LINE=$line; fi
  done <"$CONTAINERD_CONFIG"
  [ -n "$table" ] && [ -n "$binary" ]
}

# host/host.json for the study metadata: instance type and AZ from the metadata service (IMDSv2,
# with a session token), and the K3s version. Best effort: the runner records what is there.
record_host() {
  local token='' instance_type='' zone='' installed
  # Each curl exec'd in its $(...): a function there was a subshell more per field.
  if token=$(exec curl -fsS --max-time 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' "$IMDS/api/token"); then
    instance_type=$(exec curl -fsS --max-time 5 -H "X-aws-ec2-metadata-token: $token" "$IMDS/meta-data/instance-type") ||
      instance_type=''
    zone=$(exec curl -fsS --max-time 5 -H "X-aws-ec2-metadata-token: $token" "$IMDS/meta-data/placement/availability-zone") ||
      zone=''
  fi
  if [ -z "$instance_type" ] || [ -z "$zone" ]; then
    log "the instance metadata service did not answer: $HOST_FILE lacks the instance type or zone"
  fi
  # The third word of the first line, as `awk 'NR == 1 { print $3 }'` read it (a process more);
  # install_k3s's output when it ran k3s --version already (a network cell's and an agent's
  # bootstraps call this without it).
  installed=${K3S_VERSION_OUTPUT:-}
  if [ -z "$installed" ]; then installed=$(exec k3s --version); fi
  read -r _ _ installed _ <<<"$installed"
  make_dir "${HOST_FILE%/*}"
  # What is known: a field the metadata service did not give is left out.
  local fields=()
  if [ -n "$instance_type" ]; then fields+=(instanceType "$instance_type"); fi
  if [ -n "$zone" ]; then fields+=(availabilityZone "$zone"); fi
  if [ -n "$installed" ]; then fields+=(k3sVersion "$installed"); fi
  json_object 2 "${fields[@]}" >"$HOST_FILE"
  log "host: ${instance_type:-unknown type} in ${zone:-unknown zone}, K3s ${installed:-unknown}"
}

# This host's node, by the label it registers with, so that agents joining meanwhile do not count;
# a network-lab cell (no HOST_NAME) is a cluster of one node.
node_is_ready() {
  local nodes=(--all)
  if [ -n "${HOST_NAME:-}" ]; then nodes=(-l "$HOST_LABEL=$HOST_NAME"); fi
  kubectl wait --for=condition=Ready node "${nodes[@]}" --timeout=10s >/dev/null 2>&1
}

runtime_class_exists() { kubectl get runtimeclass "$RUNTIME_CLASS" >/dev/null 2>&1; }
