# shellcheck shell=bash
# Steps of a cluster with K3s agents (issue 17). On the server: the agent token from Secrets
# Manager (K3s reads it with --agent-token-file), and the wait until every agent is Ready and every
# GPU agent has reported its model cache. On an agent (settings.env of lib/aws/bootstrap/agent.ts):
# the join with the same token, and the report of its model cache.
#
# Nodes are found by the labels every host registers with (HOST_LABEL=<host>, NODE_ROLE_LABEL=
# gpu|cpu); NODE_ROLE_LABEL is the literal string of lib/config/placement.ts, which the charts'
# node selectors use.

# The agent token, read once into a root-only file (mode 600, no newline added); never printed.
# GetSecretValue signed by curl (lab-aws secret): no AWS CLI on the host.
# A refusal is reported by its last line, 300 bytes at most (cut by bash itself: main.sh sets
# LC_ALL=C, so by byte, as tail and head cut it, without their three processes).
fetch_agent_token() {
  local problem
  if ! problem=$(lab_aws --within "$((BUDGET_LEFT))" secret "$LAB_AGENT_TOKEN_SECRET" "$AGENT_TOKEN_FILE" 2>&1); then
    problem=${problem#lab-aws: }
    problem=${problem##*$'\n'}
    die "cannot read the K3s agent token from Secrets Manager ($LAB_AGENT_TOKEN_SECRET): ${problem:0:300}"
  fi
  log "agent token read from Secrets Manager into $AGENT_TOKEN_FILE (mode 600)"
}

# --- the server

wait_for_agents() {
  this_instance_id || die "the instance metadata service did not give this server's instance id (IMDSv2)"
  log "waiting for ${#AGENT_HOSTS[@]} agent(s): ${AGENT_HOSTS[*]}"
  if ! wait_until "$((WAIT_LIMIT))" agents_ready "$INSTANCE_ID"; then
    kubectl get nodes -L "$HOST_LABEL" -L "$NODE_ROLE_LABEL" || true
    die "not ready: $PENDING_AGENTS (each agent's bootstrap log: s3://$LAB_RESULTS_BUCKET/$LAB_STACK_NAME/$AGENTS_RESULTS_DIR/<host>/$LOG_OBJECT)"
  fi
  kubectl get nodes -L "$HOST_LABEL" -L "$NODE_ROLE_LABEL"
  log "every agent is Ready; every GPU agent has its model cache"
}

# Keeps what its check found missing in PENDING_AGENTS: the failure names what the wait last saw,
# without a further round of checks (each GetObject a signed request) eating the reporting margin.
agents_ready() {
  pending_agents "$1"
  [ -z "$PENDING_AGENTS" ]
}

# The step's budget less 30 s to name what is missing before the watchdog ends the step with no
# more than "over budget" (under a load average of 30 one round of the server's checks took 15 s);
# with 30 s or less left, one check, then the report. An arithmetic expression of BUDGET_LEFT
# (helpers.sh), `$((WAIT_LIMIT))`.
WAIT_LIMIT='BUDGET_LEFT > 30 ? BUDGET_LEFT - 30 : 0'

# What keeps each agent from being ready, into PENDING_AGENTS ("" when nothing does): one listing
# of the agents' nodes, then each GPU agent's report. Set, not printed: a `$(pending_agents)` was a
# subshell per poll.
pending_agents() {
  local i host rc pending=()
  list_agent_nodes
  for ((i = 0; i < ${#AGENT_HOSTS[@]}; i++)); do
    host=${AGENT_HOSTS[$i]}
    if [ "${AGENT_READY[$host]:-}" != True ]; then
      pending+=("$host has not joined or is not Ready")
    elif ((AGENT_GPUS[i] > 0)); then
      rc=0
      model_cache_reported "$host" "$1" || rc=$?
      case $rc in
      0) ;;
      4) pending+=("$host has not reported its model cache") ;;
      124) pending+=("$host: S3 did not say in time whether it reported its model cache") ;;
      *) pending+=("$host: its model cache report could not be read (lab-aws get exit $rc)") ;;
      esac
    fi
  done
  local IFS=';'
  PENDING_AGENTS="${pending[*]}"
}

# The nodes that carry the host label, listed once for all agents (a kubectl per agent and poll was a
# process each): AGENT_READY[<host>] is True when one of the host's nodes is Ready (a replaced
# agent's old node may linger NotReady), AGENT_NODE_GPUS[<host>] the allocatable nvidia.com/gpu of
# its first Ready node ("" when it has none). Fields are separated by ':', which no host name, status
# or count holds, so that an empty one stays in its place. Not `kubectl ... | grep -q`: grep ended at
# the first match, and kubectl, still printing the rest, died of SIGPIPE, which pipefail made "not
# Ready". The listing is captured whole first (as helpers.sh output_matches does) and read by bash.
# kubectl's JSONPath ends a field name only at a space, '.', ',', '[', ']', '$', '@', '{' or '}'
# (docs/facts.md §2.2), so the label's '-' and '/' need no escape; a '.' gets one.
declare -gA AGENT_READY=() AGENT_NODE_GPUS=()
list_agent_nodes() {
  local listing host ready gpus label=${HOST_LABEL//./\\.}
  AGENT_READY=() AGENT_NODE_GPUS=()
  listing=$(exec kubectl get nodes -l "$HOST_LABEL" \
    -o 'jsonpath={range .items[*]}{.metadata.labels.'"$label"'}:{.status.conditions[?(@.type=="Ready")].status}:{.status.allocatable.nvidia\.com/gpu}{"\n"}{end}' 2>/dev/null) ||
    return 0
  while IFS=: read -r host ready gpus; do
    if [ "$ready" = True ] && [ -n "$host" ] && [ -z "${AGENT_READY[$host]:-}" ]; then
      AGENT_READY[$host]=True
      AGENT_NODE_GPUS[$host]=$gpus
    fi
  done <<<"$listing"
}

# 0 when the report is there, 4 when not (lab-aws get), 124 when S3 did not answer in time: a read
# of up to a minute, begun near the wait's end, ran past the step's budget, and the watchdog ended
# the step with "over budget" instead of naming the agents. Each read now ends REPORT_RESERVE
# seconds before the budget does, which the failure keeps to be reported.
REPORT_RESERVE=10
model_cache_reported() {
  local left=$((BUDGET_LEFT - REPORT_RESERVE))
  if ((left > 60)); then left=60; fi
  if ((left <= 0)); then return 124; fi
  lab_aws --within "$left" get "s3://$LAB_RESULTS_BUCKET/$LAB_STACK_NAME/$AGENTS_RESULTS_DIR/$1/$MODEL_CACHE_REPORT_DIR/$2" - >/dev/null 2>&1
}

# Every GPU agent advertises its GPUs (the device plugin runs there too), waited for together: one
# listing a poll. A failure names the GPU agent the wait last found short, with what a listing after
# the pods' says it has; the agents before it are logged as ready, as a wait per agent logged them.
wait_for_agent_gpus() {
  local i host short='' gpu_agents=0
  for ((i = 0; i < ${#AGENT_HOSTS[@]}; i++)); do
    if ((AGENT_GPUS[i] > 0)); then gpu_agents=$((gpu_agents + 1)); fi
  done
  # A single host, or CPU agents only: nothing to list.
  if ((gpu_agents == 0)); then return 0; fi
  if ! wait_until "$((WAIT_LIMIT))" agent_gpus_allocatable; then
    short=$GPUS_SHORT
    kubectl -n kube-system get pods -o wide || true
    list_agent_nodes
  fi
  for ((i = 0; i < ${#AGENT_HOSTS[@]}; i++)); do
    host=${AGENT_HOSTS[$i]}
    if ((AGENT_GPUS[i] == 0)); then continue; fi
    if [ "$host" = "$short" ]; then
      die "agent $host reports '${AGENT_NODE_GPUS[$host]:-}' allocatable nvidia.com/gpu, expected ${AGENT_GPUS[$i]} (the NVIDIA device plugin's pod on that node, kube-system)"
    fi
    log "agent $host: allocatable nvidia.com/gpu ${AGENT_GPUS[$i]}"
  done
}

# Whether every GPU agent's Ready node advertises its GPUs; the first that does not into GPUS_SHORT.
agent_gpus_allocatable() {
  local i host
  GPUS_SHORT=''
  list_agent_nodes
  for ((i = 0; i < ${#AGENT_HOSTS[@]}; i++)); do
    host=${AGENT_HOSTS[$i]}
    if ((AGENT_GPUS[i] > 0)) && [ "${AGENT_NODE_GPUS[$host]:-}" != "${AGENT_GPUS[$i]}" ]; then
      GPUS_SHORT=$host
      return 1
    fi
  done
}

# This instance's id into INSTANCE_ID (IMDSv2: a session token first). Set, not printed: a
# `$(this_instance_id)` was a subshell more.
this_instance_id() {
  local token
  token=$(exec curl -fsS --max-time 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' "$IMDS/api/token") &&
    INSTANCE_ID=$(exec curl -fsS --max-time 5 -H "X-aws-ec2-metadata-token: $token" "$IMDS/meta-data/instance-id")
}

# --- an agent

join_cluster() {
  local token
  this_instance_id || die "the instance metadata service did not give this instance's id (IMDSv2)"
  # Unique per instance: a replacement registers anew instead of meeting the old node's password.
  NODE_NAME="$HOST_NAME-$INSTANCE_ID"
  fetch_agent_token
  token=$(<"$AGENT_TOKEN_FILE")
  curl -fsSL --retry 5 --max-time 120 -o "$WORK_DIR/k3s-install.sh" https://get.k3s.io ||
    die "cannot download the K3s installer from https://get.k3s.io"
  log "joining $LAB_SERVER_URL as node $NODE_NAME ($K3S_AGENT_EXEC)"
  # K3S_URL with K3S_TOKEN makes the installer set up an agent, unit AGENT_SERVICE (get.k3s.io,
  # setup_env). Installed without starting it: the unit waits for the server without a bound,
  # so it is started in the background and the join is watched here, within the step's budget.
  K3S_URL="$LAB_SERVER_URL" K3S_TOKEN="$token" INSTALL_K3S_VERSION="$K3S_VERSION" INSTALL_K3S_SKIP_START=true \
    INSTALL_K3S_EXEC="$K3S_AGENT_EXEC --node-name $NODE_NAME" within_budget sh "$WORK_DIR/k3s-install.sh"
  k3s --version
  systemctl start --no-block "$AGENT_SERVICE"
  if ! wait_until "$((WAIT_LIMIT))" agent_joined; then
    die "node $NODE_NAME did not join the K3s server at $LAB_SERVER_URL within the step's budget; $AGENT_SERVICE journal: $(join_failure_cause)"
  fi
  log "node $NODE_NAME joined $LAB_SERVER_URL and is Ready"
  install_follow_server
  record_host
  READY_SUMMARY="agent $HOST_NAME ($NODE_ROLE) joined as node $NODE_NAME"
}

# Every host of a lab ends together: once joined, the agent checks its server every minute and
# ends SERVER_GONE_MINUTES after the server stopped answering (lab-follow-server.sh).
install_follow_server() {
  install_program lab-follow-server "$FOLLOW_SERVER_SCRIPT"
  minute_timer lab-follow-server "End this K3s agent once the lab's K3s server has ended" "$FOLLOW_SERVER_SCRIPT"
  log "this agent ends $SERVER_GONE_MINUTES minutes after its server stops answering ($LAB_SERVER_URL)"
}

# The kubelet's kubeconfig exists once the server accepted the token; with it the node can read
# its own Node object.
agent_joined() {
  [ -f "$KUBELET_KUBECONFIG" ] &&
    [ "$(exec k3s kubectl --kubeconfig "$KUBELET_KUBECONFIG" get node "$NODE_NAME" \
      -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

# Why the join failed, in K3s's own words: the last error lines of the agent's journal (its last
# 300), each cut to 300 bytes. Matched by bash itself (main.sh sets LC_ALL=C, so by byte, as grep -i
# and cut did): grep, tail and cut were three processes more.
join_failure_cause() {
  local journal line lines=()
  journal=$(exec journalctl -u "$AGENT_SERVICE" --no-pager -n 300 2>/dev/null) || true
  while IFS= read -r line; do
    if [[ ${line,,} =~ level=(error|fatal)|unauthorized|refused|no\ route|timeout|failed ]]; then
      lines+=("${line:0:300}")
    fi
  done <<<"$journal"
  if ((${#lines[@]} == 0)); then
    printf 'no error in its last 300 lines (journalctl -u %s)' "$AGENT_SERVICE"
  else
    # The last five (a slice from -5 is empty when fewer are there).
    local IFS=$'\n' from=$((${#lines[@]} > 5 ? ${#lines[@]} - 5 : 0))
    printf '%s' "${lines[*]:from}"
  fi
}

report_model_cache() {
  local report="$WORK_DIR/model-cache.json"
  local target="s3://$LAB_RESULTS_BUCKET/$LAB_STACK_NAME/$RESULTS_SUBDIR$MODEL_CACHE_REPORT_DIR/$LAB_SERVER_INSTANCE_ID"
  # shellcheck disable=SC2153 # MODEL_NAME is a setting (settings.env), NODE_NAME set by join_cluster
  json_object 0 host "$HOST_NAME" node "$NODE_NAME" model "$MODEL_NAME" cache "$MODEL_CACHE" >"$report"
  lab_aws --within "$((BUDGET_LEFT))" put "$report" "$target" ||
    die "could not report the model cache to $target: the server places no replica before it"
  log "model cache reported to the server ($target)"
  READY_SUMMARY="$READY_SUMMARY; $EXPECTED_GPUS GPU(s), model cache of $MODEL_NAME ready"
}
