# shellcheck shell=bash
# Steps: the device plugin's GPUs, the replicas Ready and serving, each on its own physical GPU.

wait_for_device_plugin() {
  if ! wait_until "$((BUDGET_LEFT))" gpus_allocatable; then
    kubectl -n kube-system get pods -o wide || true
    die "the node reports '$(allocatable_gpus)' allocatable nvidia.com/gpu, expected $EXPECTED_GPUS (NVIDIA device plugin DaemonSet in kube-system)"
  fi
  log "allocatable nvidia.com/gpu: $EXPECTED_GPUS"
  # With agents, each GPU agent too (30-cluster.sh).
  wait_for_agent_gpus
}

# The server's node, found by its host label: with agents, the first node listed may be another.
allocatable_gpus() {
  kubectl get nodes -l "$HOST_LABEL=$HOST_NAME" -o 'jsonpath={.items[0].status.allocatable.nvidia\.com/gpu}' 2>/dev/null || true
}

# allocatable_gpus's kubectl, exec'd (a function in $(...) is a subshell more, every poll).
gpus_allocatable() {
  local gpus
  gpus=$(exec kubectl get nodes -l "$HOST_LABEL=$HOST_NAME" -o 'jsonpath={.items[0].status.allocatable.nvidia\.com/gpu}' 2>/dev/null) || true
  [ "$gpus" = "$EXPECTED_GPUS" ]
}

wait_for_replicas() {
  local set pod i
  for set in "${REPLICA_SETS[@]}"; do
    if ! kubectl -n "$NAMESPACE" rollout status "statefulset/$set" --timeout="$((BUDGET_LEFT))s"; then
      kubectl -n "$NAMESPACE" get pods -o wide || true
      for ((i = 0; i < REPLICAS; i++)); do kubectl -n "$NAMESPACE" logs --tail=10 "$set-$i" || true; done
      die "StatefulSet $set: $REPLICAS replica(s) not Ready within the step's budget"
    fi
  done
  # Ready (/health) can come before the engine serves; /v1/models is what clients need.
  for set in "${REPLICA_SETS[@]}"; do
    for ((i = 0; i < REPLICAS; i++)); do
      pod="$set-$i"
      wait_until "$((BUDGET_LEFT))" engine_serves "$pod" ||
        die "$pod is Ready but did not list model $SERVED_MODEL_NAME at GET /v1/models within the step's budget"
      log "$pod serves $SERVED_MODEL_NAME"
    done
  done
}

# From the host: K3s routes pod IPs on the node. The model list (docs/facts.md §3.1) names each
# served model as `"id": "<name>"` in its "data"; the served name is a DNS label, so matched by
# bash itself as a whole JSON string (a python3 start per poll and replica cost more than the
# rest of the step). The only other "id"s are its permissions' ("modelperm-<random>").
engine_serves() {
  local ip models pattern
  ip=$(exec kubectl -n "$NAMESPACE" get pod "$1" -o 'jsonpath={.status.podIP}' 2>/dev/null) || return 1
  [ -n "$ip" ] || return 1
  models=$(exec curl -fsS --max-time 5 "http://$ip:$VLLM_PORT/v1/models" 2>/dev/null) || return 1
  pattern="\"id\"[[:space:]]*:[[:space:]]*\"$SERVED_MODEL_NAME\""
  [[ "$models" == *'"data"'* && "$models" =~ $pattern ]]
}

record_gpu_uuids() {
  local set pod i listing uuids count line duplicates all=() pairs=() members=()
  local -A seen=()
  # A GPU line's UUID, as `sed -n -E 's/.*\(UUID: (GPU-[0-9A-Za-z-]+)\).*/\1/p'` took it (the same
  # ERE; bash matched it, where sed was a process and a subshell more per replica).
  local uuid_re='^.*\(UUID: (GPU-[0-9A-Za-z-]+)\).*$'
  for set in "${REPLICA_SETS[@]}"; do
    for ((i = 0; i < REPLICAS; i++)); do
      pod="$set-$i"
      listing=$(exec kubectl -n "$NAMESPACE" exec "$pod" -- nvidia-smi -L)
      uuids=''
      while IFS= read -r line || [ -n "$line" ]; do
        if [[ "$line" =~ $uuid_re ]]; then uuids+=${BASH_REMATCH[1]}$'\n'; fi
      done <<<"$listing"
      uuids=${uuids%$'\n'}
      # The lines that are not empty, counted by bash (grep -c . would be a process).
      count=0
      while IFS= read -r line; do
        if [ -n "$line" ]; then count=$((count + 1)); fi
      done <<<"$uuids"
      [ "$count" -eq 1 ] || die "$pod sees $count GPU(s), expected exactly 1: $uuids"
      log "$pod: $uuids"
      all+=("$uuids")
      pairs+=("$pod=$uuids")
      members+=("$pod" "$uuids")
    done
  done
  # A UUID seen twice is named by `sort | uniq -d`, which runs only then.
  duplicates=''
  for uuids in "${all[@]}"; do
    if [ -n "${seen[$uuids]:-}" ]; then
      duplicates=$(printf '%s\n' "${all[@]}" | sort | uniq -d)
      break
    fi
    seen[$uuids]=1
  done
  [ -z "$duplicates" ] || die "replicas share a physical GPU ($duplicates): each replica must have its own"
  make_dir "$RESULTS_DIR/host"
  json_object 2 "${members[@]}" >"$RESULTS_DIR/host/gpu-uuids.json"
  READY_SUMMARY="${#all[@]} replicas ready on distinct GPUs: ${pairs[*]}"
  log "$READY_SUMMARY"
}
