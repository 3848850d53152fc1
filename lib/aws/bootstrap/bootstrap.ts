import type { LabConfig } from '../../config/schema.ts';
import { HOST_FILE, STATUS_FILE } from '../../runner/layout.ts';
import {
  MODEL_CACHE_HOST_PATH,
  MODEL_CACHE_MOUNT,
  NVIDIA_RUNTIME_CLASS,
  RESULTS_HOST_PATH,
  replicaSetName,
  VLLM_PORT,
} from '../../study/topology.ts';
import {
  BOOTSTRAP_ENVIRONMENT,
  BOOTSTRAP_LOG,
  fullyQualifiedImage,
  JSON_STRING_FUNCTION,
  SIGNAL_UNIQUE_ID,
  SIGNALLED_MARKER,
  shellQuote,
  signalCommand,
  WORK_DIR,
} from './shell.ts';

/**
 * The bootstrap (lab-spec 2.2, 2.3): a bash script rendered from the lab configuration that turns
 * a fresh Deep Learning AMI into the lab - K3s with the nvidia RuntimeClass, the synthesized
 * manifests, the model in the shared cache, replicas serving on distinct GPUs - and signals the
 * stack's WaitCondition. It is shipped as an S3 asset and started by the user-data launcher.
 */

/** One step: a bash function and the title its marker shows (`==> [step 6/13] install K3s ...`). */
export interface BootstrapStep {
  /** Name of the bash function. */
  readonly name: string;
  readonly title: string;
  /** The bash function definition(s) of the step. */
  readonly body: string;
}

/** K3s flags (lab-spec 2.2): a kubeconfig kubectl can read without sudo, no bundled Traefik. */
export const K3S_EXEC = '--write-kubeconfig-mode 644 --disable traefik';

/** The ShareGPT file of vLLM's benchmark documentation (lab-spec 3.8). */
export const SHAREGPT_URL =
  'https://huggingface.co/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered/resolve/main/ShareGPT_V3_unfiltered_cleaned_split.json';

/**
 * Helm release installed (checksum-verified) only when prerequisites.json lists a Helm chart, which
 * the ai-gateway arm does. UNCONFIRMED here: the release exists on get.helm.sh (not fetched).
 */
export const HELM_VERSION = 'v3.19.0';
export const HELM_PATH = '/usr/local/bin/helm';

/** Uploads RESULTS_HOST_PATH to the results bucket; written by step 1, run by the timer and at shutdown. */
export const RESULTS_SYNC_SCRIPT = '/usr/local/sbin/lab-sync-results';

/**
 * With `runner.terminateWhenDone`: run every minute by a systemd timer; once status.json says the
 * study finished or failed, it uploads the results and shuts the host down (which terminates it).
 */
export const TERMINATE_WHEN_DONE_SCRIPT = '/usr/local/sbin/lab-terminate-when-done';
/** The systemd timer (and service) that runs TERMINATE_WHEN_DONE_SCRIPT. */
export const TERMINATE_WHEN_DONE_UNIT = 'lab-terminate-when-done';

/** Created by the last step once SUCCESS reached the WaitCondition: the testbed is ready. */
export const READY_MARKER = `${WORK_DIR}/ready`;

/** K3s writes it with mode 644 (K3S_EXEC): every kubectl on the host, and `lab run`, use it. */
export const KUBECONFIG_PATH = '/etc/rancher/k3s/k3s.yaml';

/** The instance metadata service (IMDSv2: every read needs a session token). */
export const IMDS_URL = 'http://169.254.169.254/latest';

/** The script the launcher runs as `bash bootstrap.sh`, with BOOTSTRAP_ENVIRONMENT set. */
export function renderBootstrap(config: LabConfig): string {
  const steps = bootstrapSteps(config);
  return [
    header(),
    settings(config, steps.length),
    helpers(),
    ...steps.map((step) => step.body),
    main(steps),
    '# Run when executed; when sourced (tests), only define the functions.',
    `if [[ "\${BASH_SOURCE[0]}" == "$0" ]]; then main "$@"; fi`,
    '',
  ].join('\n');
}

/**
 * The steps in order. The model is pre-fetched after K3s (the download runs in the vLLM image,
 * through K3s's containerd) and before anything is applied, so no replica ever starts against an
 * empty cache and two replicas never download into it at once.
 */
export function bootstrapSteps(config: LabConfig): BootstrapStep[] {
  return [
    armCostGuard(config),
    waitForAptLocks(),
    preflight(),
    checkGpus(config),
    checkContainerRuntime(),
    installK3s(config),
    prefetch(config),
    applyPrerequisites(),
    applyCharts(),
    waitForDevicePlugin(config),
    waitForReplicas(config),
    recordGpuUuids(),
    signalSuccess(),
  ];
}

/** Lifetime in whole minutes for `shutdown -h +<minutes>` (at least one). */
export function lifetimeMinutes(config: LabConfig): number {
  return Math.max(1, Math.round(config.instance.maxLifetimeHours * 60));
}

/** The StatefulSets whose replicas the bootstrap waits for: the standard set, plus llm-d's when enabled. */
export function replicaSets(config: LabConfig): string[] {
  const sets = [replicaSetName(config, 'standard')];
  if (config.study.optionalArms.includes('llmd-precise')) sets.push(replicaSetName(config, 'kv-events'));
  return sets;
}

/** Host path of the ShareGPT file: pods see the shared cache at /models, the host at MODEL_CACHE_HOST_PATH. */
export function sharegptHostPath(config: LabConfig): string {
  const inPod = config.benchmark.sharegptPath;
  const prefix = `${MODEL_CACHE_MOUNT}/`;
  if (!inPod.startsWith(prefix)) {
    throw new Error(
      `benchmark.sharegptPath must lie in the shared cache ${prefix} (the only host folder the benchmark pods mount), got ${inPod}`,
    );
  }
  return `${MODEL_CACHE_HOST_PATH}/${inPod.slice(prefix.length)}`;
}

function header(): string {
  const env = BOOTSTRAP_ENVIRONMENT.join(' ');
  return `#!/bin/bash
# Lab bootstrap, rendered from the lab configuration by lib/aws/bootstrap/bootstrap.ts.
# Started by the user-data launcher with: ${env}.
# LAB_MANIFESTS_DIR is the synthesized cluster folder: NN-*.yaml (applied in file-name order),
# prerequisites.json (third-party manifests, applied first) and jobs/ (never applied: a Job starts
# load on creation; the runner creates them). Every step is logged to ${BOOTSTRAP_LOG} with a
# marker; a failure signals FAILURE with the step and the log tail. WAIT_HANDLE_URL is never logged.`;
}

function settings(config: LabConfig, totalSteps: number): string {
  const sharegpt = config.study.sharegptControl ? sharegptHostPath(config) : '';
  const sets = replicaSets(config).map(shellQuote).join(' ');
  const q = shellQuote;
  return `
# --- settings from the lab configuration
readonly LOG_FILE=${q(BOOTSTRAP_LOG)}
readonly WORK_DIR=${q(WORK_DIR)}
readonly SIGNALLED_MARKER=${q(SIGNALLED_MARKER)}
readonly SYNC_SCRIPT=${q(RESULTS_SYNC_SCRIPT)}
readonly READY_MARKER=${q(READY_MARKER)}
readonly TERMINATE_WHEN_DONE=${config.runner.terminateWhenDone ? 1 : 0}
readonly DONE_SCRIPT=${q(TERMINATE_WHEN_DONE_SCRIPT)}
readonly IMDS=${q(IMDS_URL)}
readonly TOTAL_STEPS=${totalSteps}
readonly LIFETIME_MINUTES=${lifetimeMinutes(config)}
readonly INSTANCE_TYPE=${q(config.instance.type)}
readonly EXPECTED_GPUS=${config.instance.gpus}
readonly AMI_PARAMETER=${q(config.instance.amiParameter)}
readonly K3S_VERSION=${q(config.k3s.version)}
readonly K3S_EXEC=${q(K3S_EXEC)}
readonly RUNTIME_CLASS=${q(NVIDIA_RUNTIME_CLASS)}
readonly NAMESPACE=${q(config.namespace)}
readonly MODEL_NAME=${q(config.model.name)}
readonly SERVED_MODEL_NAME=${q(config.model.servedName)}
readonly VLLM_IMAGE=${q(config.vllm.image)}
readonly VLLM_IMAGE_REF=${q(fullyQualifiedImage(config.vllm.image))}
readonly VLLM_PORT=${VLLM_PORT}
readonly REPLICAS=${config.vllm.replicas}
readonly REPLICA_SETS=(${sets})
readonly MODEL_CACHE=${q(MODEL_CACHE_HOST_PATH)}
readonly MODEL_CACHE_MOUNT=${q(MODEL_CACHE_MOUNT)}
readonly RESULTS_DIR=${q(RESULTS_HOST_PATH)}
readonly SHAREGPT_FILE=${q(sharegpt)}
readonly SHAREGPT_URL=${q(SHAREGPT_URL)}
readonly HELM=${q(HELM_PATH)}
readonly HELM_VERSION=${q(HELM_VERSION)}
readonly HOST_FILE=${q(`${RESULTS_HOST_PATH}/${HOST_FILE}`)}

export KUBECONFIG=${q(KUBECONFIG_PATH)}
# cloud-init may start the script without HOME; helm and the AWS CLI keep state under it.
export HOME="\${HOME:-/root}"
# Byte order for globs, so NN-*.yaml apply in the order synth numbered them.
export LC_ALL=C
# K3s puts kubectl in /usr/local/bin; appended, so the PATH given to the script wins.
export PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
shopt -s nullglob

CURRENT_STEP='before the first step'
FAILURE_DETAIL=''
FAILED_COMMAND=''
FAILED_LINE=''
GPU_SUMMARY=''`;
}

function helpers(): string {
  return `
# --- helpers
log() { printf '%s %s\\n' "$(date -u +%FT%TZ)" "$*"; }

# Fails the current step with a message; the EXIT trap signals FAILURE.
die() {
  FAILURE_DETAIL=$*
  log "ERROR: $*"
  exit 1
}

# wait_until <seconds> <command...>: runs the command every 5 s until it succeeds; 1 on timeout.
wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    if ((SECONDS >= deadline)); then return 1; fi
    sleep 5
  done
}

run_step() {
  CURRENT_STEP="[step $1/$TOTAL_STEPS] $2"
  log "==> $CURRENT_STEP"
  "$3"
}

${JSON_STRING_FUNCTION}

# send_signal <status> <reason as JSON> <data as JSON>: PUT to the WaitCondition handle.
send_signal() {
  local body="$WORK_DIR/signal.json"
  printf '{"Status":"%s","Reason":%s,"UniqueId":"${SIGNAL_UNIQUE_ID}","Data":%s}\\n' "$1" "$2" "$3" >"$body"
  if ${signalCommand('"$body"')} >/dev/null; then
    touch "$SIGNALLED_MARKER"
  else
    log "could not deliver the $1 signal to the WaitCondition"
    return 1
  fi
}

# Best effort: the log goes with the results, and both are uploaded now.
upload_results_now() {
  mkdir -p "$RESULTS_DIR/host"
  cp "$LOG_FILE" "$RESULTS_DIR/host/bootstrap.log" || true
  if [ -x "$SYNC_SCRIPT" ]; then
    timeout 300 "$SYNC_SCRIPT" || log "results upload failed; the timer and the shutdown hook retry"
  fi
}

on_exit() {
  local rc=$? detail reason data
  trap - ERR EXIT
  set +e
  if [ "$rc" -eq 0 ]; then return 0; fi
  detail=\${FAILURE_DETAIL:-"exit code $rc from: $FAILED_COMMAND (line $FAILED_LINE)"}
  log "FAILED $CURRENT_STEP: $detail"
  # A small reason: CloudFormation shows it in the stack events.
  reason=$({
    printf '%s failed: %s' "$CURRENT_STEP" "$detail" | head -c 500
    printf '\\n--- last lines of %s:\\n' "$LOG_FILE"
    tail -n 20 "$LOG_FILE" | tail -c 1300
  } | json_string)
  data=$(printf '%s' "$CURRENT_STEP" | json_string)
  send_signal FAILURE "$reason" "$data"
  upload_results_now
  exit "$rc"
}

check_environment() {
  local name missing=()
  for name in ${BOOTSTRAP_ENVIRONMENT.join(' ')}; do
    if [ -z "\${!name:-}" ]; then missing+=("$name"); fi
  done
  if ((\${#missing[@]} > 0)); then
    log "ERROR: environment variables missing: \${missing[*]} (the user-data launcher sets them)"
    exit 2
  fi
}
`;
}

function step(name: string, title: string, body: string): BootstrapStep {
  return { name, title, body: `# step: ${title}\n${body.trim()}\n` };
}

/**
 * The script TERMINATE_WHEN_DONE_SCRIPT holds: quiet until `<results>/status.json` says the study
 * finished or failed, then it uploads the results and shuts the host down. The launch template's
 * instance-initiated shutdown behaviour is `terminate`, and the final-upload unit uploads once more.
 */
export function renderTerminateWhenDone(): string {
  const q = shellQuote;
  return `#!/bin/bash
# Ends the lab host once its study is over (runner.terminateWhenDone). Written by the lab bootstrap,
# run every minute by ${TERMINATE_WHEN_DONE_UNIT}.timer.
set -euo pipefail
readonly STATUS_FILE=${q(`${RESULTS_HOST_PATH}/${STATUS_FILE}`)}
readonly SYNC_SCRIPT=${q(RESULTS_SYNC_SCRIPT)}
readonly LOG_FILE=${q(BOOTSTRAP_LOG)}

[ -f "$STATUS_FILE" ] || exit 0
# The runner renames status.json into place, so a read never sees half a file.
state=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("state", ""))' "$STATUS_FILE") ||
  exit 0
case "$state" in
finished | failed) ;;
*) exit 0 ;;
esac
printf '%s %s\\n' "$(date -u +%FT%TZ)" "the study is $state (runner.terminateWhenDone): uploading the results, then terminating" |
  tee -a "$LOG_FILE"
timeout 600 "$SYNC_SCRIPT" || echo "results upload failed; the shutdown hook uploads once more" | tee -a "$LOG_FILE"
shutdown -h now "lab study $state (runner.terminateWhenDone): results uploaded, terminating"
`;
}

function armCostGuard(config: LabConfig): BootstrapStep {
  const minutes = lifetimeMinutes(config);
  const whenDone = config.runner.terminateWhenDone
    ? '; terminate when the study is done (runner.terminateWhenDone)'
    : '';
  return step(
    'arm_cost_guard',
    `arm the cost guard: shut down in ${minutes} min (instance.maxLifetimeHours ${config.instance.maxLifetimeHours}), results to S3${whenDone}`,
    `
arm_cost_guard() {
  # First, so that nothing later can leave the GPU host running: the launch template makes an
  # instance-initiated shutdown terminate the instance.
  shutdown -h "+$LIFETIME_MINUTES" "lab lifetime reached (instance.maxLifetimeHours): uploading results, then terminating"
  local deadline
  deadline=$(date -u -d "+$LIFETIME_MINUTES minutes" +%Y-%m-%dT%H:%M:%SZ)
  printf '%s\\n' "$deadline" >"$WORK_DIR/deadline"
  log "the instance shuts down and terminates at $deadline (to extend: shutdown -c; shutdown -h +<minutes>)"
  install_results_upload
  if ((TERMINATE_WHEN_DONE)); then install_terminate_when_done; fi
}

# runner.terminateWhenDone: a timer checks status.json every minute; a finished or failed study
# uploads the results and shuts the host down.
install_terminate_when_done() {
  cat >"$DONE_SCRIPT" <<'SCRIPT'
${renderTerminateWhenDone().trimEnd()}
SCRIPT
  chmod 755 "$DONE_SCRIPT"
  cat >/etc/systemd/system/${TERMINATE_WHEN_DONE_UNIT}.service <<'UNIT'
[Unit]
Description=Upload the lab results and terminate the host once the study is over

[Service]
Type=oneshot
ExecStart=${TERMINATE_WHEN_DONE_SCRIPT}
UNIT
  cat >/etc/systemd/system/${TERMINATE_WHEN_DONE_UNIT}.timer <<'UNIT'
[Unit]
Description=Check every minute whether the lab study is over (runner.terminateWhenDone)

[Timer]
OnActiveSec=1min
OnUnitActiveSec=1min

[Install]
WantedBy=timers.target
UNIT
  systemctl daemon-reload
  systemctl enable --now ${TERMINATE_WHEN_DONE_UNIT}.timer
  log "runner.terminateWhenDone: the host uploads the results and terminates once status.json says finished or failed"
}

# Results reach S3 every 5 minutes and once more when the host stops (the lifetime shutdown too).
install_results_upload() {
  local aws_cli
  aws_cli=$(command -v aws) || die "the AWS CLI is not on the PATH (expected on the AMI of $AMI_PARAMETER): results could not be uploaded"
  mkdir -p "$RESULTS_DIR"
  {
    echo '#!/bin/bash'
    echo '# Uploads the lab results to S3 (written by the lab bootstrap).'
    printf 'exec %q s3 sync %q %q --region %q --only-show-errors\\n' \\
      "$aws_cli" "$RESULTS_DIR/" "s3://$LAB_RESULTS_BUCKET/$LAB_STACK_NAME/" "$LAB_REGION"
  } >"$SYNC_SCRIPT"
  chmod 755 "$SYNC_SCRIPT"
  cat >/etc/systemd/system/lab-results-sync.service <<'UNIT'
[Unit]
Description=Upload the lab results to S3
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
ExecStart=${RESULTS_SYNC_SCRIPT}
UNIT
  cat >/etc/systemd/system/lab-results-sync.timer <<'UNIT'
[Unit]
Description=Upload the lab results to S3 every 5 minutes

[Timer]
OnActiveSec=5min
OnUnitActiveSec=5min

[Install]
WantedBy=timers.target
UNIT
  # Started now and stopped at shutdown: stopping runs the upload while the network is still up
  # (units stop in the reverse order of After=).
  cat >/etc/systemd/system/lab-results-final-upload.service <<'UNIT'
[Unit]
Description=Upload the lab results to S3 before the host stops
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/true
ExecStop=${RESULTS_SYNC_SCRIPT}
TimeoutStopSec=600

[Install]
WantedBy=multi-user.target
UNIT
  systemctl daemon-reload
  systemctl enable --now lab-results-sync.timer lab-results-final-upload.service
  log "results: $RESULTS_DIR -> s3://$LAB_RESULTS_BUCKET/$LAB_STACK_NAME/ every 5 minutes and at shutdown"
}`,
  );
}

function waitForAptLocks(): BootstrapStep {
  return step(
    'wait_for_apt_locks',
    'wait for the apt/dpkg locks (cloud-init, unattended-upgrades)',
    `
wait_for_apt_locks() {
  # unattended-upgrades holds the dpkg lock for minutes at first boot.
  wait_until 900 apt_is_idle ||
    die "apt/dpkg still busy after 15 minutes: $(pgrep -a -f '/usr/bin/(apt|apt-get|dpkg|unattended-upgrade)( |$)' || true)"
  log "apt and dpkg are idle"
}

# The locks are what apt-get would wait on. Process names alone mislead: unattended-upgrades'
# shutdown helper runs for the machine's whole life under the same 15-character name
# ("unattended-upgr") as the upgrade worker, so processes are matched by their full path.
apt_is_idle() {
  if command -v fuser >/dev/null; then
    if fuser /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock >/dev/null 2>&1; then
      return 1
    fi
    return 0
  fi
  if pgrep -f '/usr/bin/(apt|apt-get|dpkg|unattended-upgrade)( |$)' >/dev/null; then return 1; fi
  return 0
}`,
  );
}

function preflight(): BootstrapStep {
  return step(
    'preflight',
    'preflight: tools, manifests folder, prerequisites resolve',
    `
preflight() {
  local tool kind id source release chart version namespace n=0 charts=("$LAB_MANIFESTS_DIR"/[0-9]*.yaml)
  for tool in curl python3 timeout sha256sum; do
    command -v "$tool" >/dev/null || die "'$tool' is not on the PATH (expected on the AMI of $AMI_PARAMETER)"
  done
  [ -f "$LAB_MANIFESTS_DIR/prerequisites.json" ] ||
    die "$LAB_MANIFESTS_DIR/prerequisites.json is missing: the manifests asset is not a synthesized lab folder"
  ((\${#charts[@]} > 0)) || die "no chart files (NN-*.yaml) in $LAB_MANIFESTS_DIR"
  log "charts to apply, in order: \${charts[*]##*/}"
  read_prerequisites
  rm -rf "$WORK_DIR/prerequisites"
  mkdir -p "$WORK_DIR/prerequisites"
  # Now, before K3s and the image pulls: a release URL or chart that does not resolve fails in the
  # first minutes, not after half an hour.
  while IFS=$'\\t' read -r -u 3 kind id source release chart version namespace; do
    n=$((n + 1))
    if [ "$kind" = manifest ]; then
      log "downloading prerequisite $id from $source"
      curl -fsSL --retry 5 --max-time 300 -o "$WORK_DIR/prerequisites/$id.yaml" "$source" ||
        die "cannot download prerequisite $id from $source"
    else
      ensure_helm
      "$HELM" show chart "$chart" --version "$version" >/dev/null ||
        die "prerequisite $id: Helm chart $chart version $version does not resolve"
      log "prerequisite $id: Helm chart $chart $version resolves (release $release in $namespace)"
    fi
  done 3<"$WORK_DIR/prerequisites.tsv"
  while IFS=$'\\t' read -r -u 3 kind id source namespace chart; do
    [ -f "$LAB_MANIFESTS_DIR/$source.yaml" ] ||
      die "after-apply step $id ($kind $namespace/$chart) follows $source.yaml, which is not in $LAB_MANIFESTS_DIR"
  done 3<"$WORK_DIR/after-apply.tsv"
  log "$n prerequisite(s) resolve"
}

# prerequisites.json -> prerequisites.tsv (kind id url release chart version namespace) and
# after-apply.tsv (kind id after namespace deployment); the URLs live in one place, lib/prereqs.
read_prerequisites() {
  python3 - "$LAB_MANIFESTS_DIR/prerequisites.json" "$WORK_DIR" <<'PY' ||
import json, sys
doc = json.load(open(sys.argv[1]))
fields = ("kind", "id", "url", "release", "chart", "version", "namespace")
with open(sys.argv[2] + "/prerequisites.tsv", "w") as out:
    for p in doc["prerequisites"]:
        if p["kind"] not in ("manifest", "helm"):
            sys.exit("unknown prerequisite kind " + p["kind"] + " (" + p["id"] + ")")
        print(*(p.get(f, "-") for f in fields), sep="\\t", file=out)
with open(sys.argv[2] + "/after-apply.tsv", "w") as out:
    for s in doc.get("afterApply", []):
        if s["kind"] != "rollout-restart":
            sys.exit("unknown after-apply kind " + s["kind"] + " (" + s["id"] + ")")
        print(s["kind"], s["id"], s["after"], s["namespace"], s["deployment"], sep="\\t", file=out)
PY
    die "cannot use $LAB_MANIFESTS_DIR/prerequisites.json (see the line above)"
}

# Helm, pinned and checked against its published SHA-256; only for Helm prerequisites.
ensure_helm() {
  if [ -x "$HELM" ]; then return 0; fi
  local arch tarball
  arch=$(dpkg --print-architecture)
  tarball="helm-$HELM_VERSION-linux-$arch.tar.gz"
  if ! curl -fsSL --retry 5 -o "$WORK_DIR/$tarball" "https://get.helm.sh/$tarball" ||
    ! curl -fsSL --retry 5 -o "$WORK_DIR/$tarball.sha256sum" "https://get.helm.sh/$tarball.sha256sum"; then
    die "cannot download Helm $HELM_VERSION from https://get.helm.sh/$tarball"
  fi
  (cd "$WORK_DIR" && sha256sum -c "$tarball.sha256sum") || die "$tarball does not match its published checksum"
  tar -xzf "$WORK_DIR/$tarball" -C "$WORK_DIR" "linux-$arch/helm"
  install -m 755 "$WORK_DIR/linux-$arch/helm" "$HELM"
  "$HELM" version --short
}`,
  );
}

function checkGpus(config: LabConfig): BootstrapStep {
  return step(
    'check_gpus',
    `check the GPUs: nvidia-smi lists ${config.instance.gpus} (instance.gpus)`,
    `
check_gpus() {
  local listing found
  listing=$(nvidia-smi -L) || die "nvidia-smi failed: the NVIDIA driver is not working (AMI of $AMI_PARAMETER)"
  printf '%s\\n' "$listing"
  found=$(grep -c '^GPU [0-9]' <<<"$listing" || true)
  [ "$found" -eq "$EXPECTED_GPUS" ] ||
    die "nvidia-smi -L lists $found GPU(s), expected $EXPECTED_GPUS (instance.gpus for $INSTANCE_TYPE)"
  mkdir -p "$RESULTS_DIR/host"
  printf '%s\\n' "$listing" >"$RESULTS_DIR/host/nvidia-smi-L.txt"
  nvidia-smi topo -m | tee "$RESULTS_DIR/host/nvidia-smi-topo.txt"
}`,
  );
}

function checkContainerRuntime(): BootstrapStep {
  return step(
    'check_container_runtime',
    'check nvidia-container-runtime (K3s needs it for the nvidia RuntimeClass)',
    `
check_container_runtime() {
  if command -v nvidia-container-runtime >/dev/null; then
    log "found $(command -v nvidia-container-runtime)"
    return 0
  fi
  # The DLAMI ships the toolkit; another AMI gets it from NVIDIA's apt repository (the steps of
  # NVIDIA's install guide), before K3s starts and looks for the runtime.
  log "nvidia-container-runtime is missing (the AMI of $AMI_PARAMETER should have it): installing nvidia-container-toolkit"
  local keyring=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg arch
  arch=$(dpkg --print-architecture)
  curl -fsSL --retry 5 https://nvidia.github.io/libnvidia-container/gpgkey | gpg --dearmor --yes -o "$keyring"
  echo "deb [signed-by=$keyring] https://nvidia.github.io/libnvidia-container/stable/deb/$arch /" \\
    >/etc/apt/sources.list.d/nvidia-container-toolkit.list
  apt-get -o DPkg::Lock::Timeout=600 update -q
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q nvidia-container-toolkit
  command -v nvidia-container-runtime >/dev/null ||
    die "nvidia-container-runtime still missing after installing nvidia-container-toolkit; use the AMI of $AMI_PARAMETER"
}`,
  );
}

function installK3s(config: LabConfig): BootstrapStep {
  return step(
    'install_k3s',
    `install K3s ${config.k3s.version} and check RuntimeClass ${NVIDIA_RUNTIME_CLASS}`,
    `
install_k3s() {
  # The installer is get.k3s.io's; the K3s release it installs is pinned by INSTALL_K3S_VERSION.
  curl -fsSL --retry 5 --max-time 120 -o "$WORK_DIR/k3s-install.sh" https://get.k3s.io ||
    die "cannot download the K3s installer from https://get.k3s.io"
  INSTALL_K3S_VERSION="$K3S_VERSION" INSTALL_K3S_EXEC="$K3S_EXEC" sh "$WORK_DIR/k3s-install.sh"
  k3s --version
  wait_until 300 node_is_ready || die "the K3s node did not become Ready within 5 minutes (journalctl -u k3s)"
  # K3s (since v1.28.5+k3s1) registers the RuntimeClass when it finds nvidia-container-runtime.
  wait_until 120 runtime_class_exists ||
    die "RuntimeClass $RUNTIME_CLASS missing 2 minutes after K3s started: K3s did not detect nvidia-container-runtime (grep nvidia /var/lib/rancher/k3s/agent/etc/containerd/config.toml)"
  kubectl get runtimeclass
  record_host
}

# host/host.json for the study metadata: instance type and AZ from the metadata service (IMDSv2,
# with a session token), and the K3s version. Best effort: the runner records what is there.
record_host() {
  local token='' instance_type='' zone='' k3s_version
  if token=$(curl -fsS --max-time 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' "$IMDS/api/token"); then
    instance_type=$(imds_get meta-data/instance-type "$token") || instance_type=''
    zone=$(imds_get meta-data/placement/availability-zone "$token") || zone=''
  fi
  if [ -z "$instance_type" ] || [ -z "$zone" ]; then
    log "the instance metadata service did not answer: $HOST_FILE lacks the instance type or zone"
  fi
  k3s_version=$(k3s --version | awk 'NR == 1 { print $3 }')
  mkdir -p "$(dirname "$HOST_FILE")"
  python3 -c 'import json, sys
keys = ("instanceType", "availabilityZone", "k3sVersion")
print(json.dumps({k: v for k, v in zip(keys, sys.argv[1:]) if v}, indent=2))' \\
    "$instance_type" "$zone" "$k3s_version" >"$HOST_FILE"
  log "host: \${instance_type:-unknown type} in \${zone:-unknown zone}, K3s \${k3s_version:-unknown}"
}

imds_get() { curl -fsS --max-time 5 -H "X-aws-ec2-metadata-token: $2" "$IMDS/$1"; }

node_is_ready() { kubectl wait --for=condition=Ready node --all --timeout=10s >/dev/null 2>&1; }

runtime_class_exists() { kubectl get runtimeclass "$RUNTIME_CLASS" >/dev/null 2>&1; }`,
  );
}

function prefetch(config: LabConfig): BootstrapStep {
  const sharegpt = config.study.sharegptControl ? ' and the ShareGPT file' : '';
  return step(
    'prefetch',
    `pre-fetch ${config.model.name}${sharegpt} into the shared cache; pull images in parallel`,
    `
prefetch() {
  local image pid vllm_pull failed=() images=()
  local -A fetches=()
  mkdir -p "$MODEL_CACHE"
  # The model download runs in the vLLM image: pull it first, and everything else meanwhile.
  pull_image "$VLLM_IMAGE" &
  vllm_pull=$!
  mapfile -t images < <(manifest_images)
  for image in "\${images[@]}"; do
    if [ "$image" != "$VLLM_IMAGE" ]; then
      pull_image "$image" &
      fetches[$!]=$image
    fi
  done
  if [ -n "$SHAREGPT_FILE" ]; then
    download_sharegpt &
    fetches[$!]="the ShareGPT file"
  fi
  wait "$vllm_pull" || die "cannot pull $VLLM_IMAGE, which the model download runs in"
  download_model
  for pid in "\${!fetches[@]}"; do
    wait "$pid" || failed+=("\${fetches[$pid]}")
  done
  ((\${#failed[@]} == 0)) || die "could not fetch: \${failed[*]}"
}

# Every image the lab's pods use, the benchmark Jobs' included (read, never applied).
manifest_images() {
  sed -n -E "s/^[[:space:]]*(- )?image:[[:space:]]*[\\"']?([^\\"'[:space:]]+).*/\\\\2/p" \\
    "$LAB_MANIFESTS_DIR"/*.yaml "$LAB_MANIFESTS_DIR"/jobs/*.yaml </dev/null | sort -u
}

pull_image() {
  if timeout 1800 k3s crictl pull "$1" >/dev/null; then
    log "pulled $1"
  else
    log "failed to pull $1"
    return 1
  fi
}

# Once, on the host, so that the benchmark pods never each download it.
download_sharegpt() {
  if [ -s "$SHAREGPT_FILE" ]; then
    log "ShareGPT file already at $SHAREGPT_FILE"
    return 0
  fi
  mkdir -p "$(dirname "$SHAREGPT_FILE")"
  if curl -fsSL --retry 5 --max-time 1800 -o "$SHAREGPT_FILE.part" "$SHAREGPT_URL" &&
    mv "$SHAREGPT_FILE.part" "$SHAREGPT_FILE"; then
    log "downloaded the ShareGPT file to $SHAREGPT_FILE"
  else
    log "failed to download $SHAREGPT_URL"
    return 1
  fi
}

# The replicas see the cache as HF_HOME=$MODEL_CACHE_MOUNT; the download writes the same layout.
download_model() {
  log "downloading $MODEL_NAME into $MODEL_CACHE with $VLLM_IMAGE_REF"
  timeout 2400 k3s ctr --namespace k8s.io run --rm --net-host \\
    --mount "type=bind,src=$MODEL_CACHE,dst=$MODEL_CACHE_MOUNT,options=rbind:rw" \\
    --mount type=bind,src=/etc/resolv.conf,dst=/etc/resolv.conf,options=rbind:ro \\
    --env "HF_HOME=$MODEL_CACHE_MOUNT" --env HF_HUB_DISABLE_PROGRESS_BARS=1 \\
    "$VLLM_IMAGE_REF" lab-model-prefetch \\
    python3 -c 'import sys; from huggingface_hub import snapshot_download; print(snapshot_download(sys.argv[1]))' \\
    "$MODEL_NAME" || die "downloading $MODEL_NAME into $MODEL_CACHE failed (see the lines above)"
}`,
  );
}

function applyPrerequisites(): BootstrapStep {
  return step(
    'apply_prerequisites',
    'apply the prerequisites of prerequisites.json in order, waiting for their CRDs and Deployments',
    `
apply_prerequisites() {
  local kind id source release chart version namespace
  while IFS=$'\\t' read -r -u 3 kind id source release chart version namespace; do
    if [ "$kind" = manifest ]; then
      log "applying prerequisite $id ($source)"
      # Server-side: CRD bundles exceed the annotation size limit of client-side apply.
      kubectl apply --server-side --field-manager=lab-bootstrap -f "$WORK_DIR/prerequisites/$id.yaml"
      wait_for_crds
      wait_for_deployments_in "$WORK_DIR/prerequisites/$id.yaml"
    else
      log "installing prerequisite $id: Helm chart $chart $version as $release in $namespace"
      "$HELM" upgrade --install "$release" "$chart" --version "$version" --namespace "$namespace" \\
        --create-namespace --wait --timeout 10m || die "Helm install of $id ($chart $version) failed"
      wait_for_crds
    fi
  done 3<"$WORK_DIR/prerequisites.tsv"
}

wait_for_crds() {
  wait_until 300 crds_established || die "CustomResourceDefinitions not Established within 5 minutes"
}

crds_established() { kubectl wait --for=condition=Established crd --all --timeout=30s >/dev/null 2>&1; }

# A controller a later step relies on (Envoy Gateway before the AI Gateway charts) must be up.
wait_for_deployments_in() {
  local namespace name
  kubectl get -f "$1" -o json | python3 -c 'import json, sys
doc = json.load(sys.stdin)
for o in doc.get("items", [doc]):
    if o["kind"] == "Deployment":
        print(o["metadata"]["namespace"], o["metadata"]["name"])' >"$WORK_DIR/deployments.txt"
  while read -r -u 3 namespace name; do
    kubectl -n "$namespace" rollout status "deployment/$name" --timeout=300s ||
      die "Deployment $namespace/$name of $1 not available within 5 minutes"
  done 3<"$WORK_DIR/deployments.txt"
}`,
  );
}

function applyCharts(): BootstrapStep {
  return step(
    'apply_charts',
    'apply the lab charts (NN-*.yaml) in file-name order, not jobs/, with their after-apply steps',
    `
apply_charts() {
  local file
  # Only the top-level NN-*.yaml files: jobs/ holds the study's Jobs, which start load on creation.
  for file in "$LAB_MANIFESTS_DIR"/[0-9]*.yaml; do
    log "applying \${file##*/}"
    kubectl apply --server-side --field-manager=lab-bootstrap -f "$file"
    run_after_apply "$(basename "$file" .yaml)"
  done
}

# The afterApply steps of prerequisites.json that follow this file (a restart of a controller
# that must run on what the file wrote before the lab goes on).
run_after_apply() {
  local kind id after namespace deployment
  while IFS=$'\\t' read -r -u 3 kind id after namespace deployment; do
    if [ "$after" = "$1" ]; then
      log "after $1: $id ($kind deployment/$deployment in $namespace)"
      kubectl -n "$namespace" rollout restart "deployment/$deployment"
      kubectl -n "$namespace" rollout status "deployment/$deployment" --timeout=300s ||
        die "$id: deployment/$deployment in $namespace did not roll out within 5 minutes"
    fi
  done 3<"$WORK_DIR/after-apply.tsv"
}`,
  );
}

function waitForDevicePlugin(config: LabConfig): BootstrapStep {
  return step(
    'wait_for_device_plugin',
    `wait for the device plugin: ${config.instance.gpus} allocatable nvidia.com/gpu`,
    `
wait_for_device_plugin() {
  if ! wait_until 600 gpus_allocatable; then
    kubectl -n kube-system get pods -o wide || true
    die "the node reports '$(allocatable_gpus)' allocatable nvidia.com/gpu after 10 minutes, expected $EXPECTED_GPUS (NVIDIA device plugin DaemonSet in kube-system)"
  fi
  log "allocatable nvidia.com/gpu: $EXPECTED_GPUS"
}

allocatable_gpus() {
  kubectl get nodes -o 'jsonpath={.items[0].status.allocatable.nvidia\\.com/gpu}' 2>/dev/null || true
}

gpus_allocatable() { [ "$(allocatable_gpus)" = "$EXPECTED_GPUS" ]; }`,
  );
}

function waitForReplicas(config: LabConfig): BootstrapStep {
  const sets = replicaSets(config);
  const pods = sets.length * config.vllm.replicas;
  return step(
    'wait_for_replicas',
    `wait for ${pods} vLLM replica(s) (${sets.join(', ')}) to be Ready and serve /v1/models`,
    `
wait_for_replicas() {
  local set pod i
  for set in "\${REPLICA_SETS[@]}"; do
    if ! kubectl -n "$NAMESPACE" rollout status "statefulset/$set" --timeout=1200s; then
      kubectl -n "$NAMESPACE" get pods -o wide || true
      for ((i = 0; i < REPLICAS; i++)); do kubectl -n "$NAMESPACE" logs --tail=10 "$set-$i" || true; done
      die "StatefulSet $set: $REPLICAS replica(s) not Ready within 20 minutes"
    fi
  done
  # Ready (/health) can come before the engine serves; /v1/models is what clients need.
  for set in "\${REPLICA_SETS[@]}"; do
    for ((i = 0; i < REPLICAS; i++)); do
      pod="$set-$i"
      wait_until 600 engine_serves "$pod" ||
        die "$pod is Ready but did not list model $SERVED_MODEL_NAME at GET /v1/models within 10 minutes"
      log "$pod serves $SERVED_MODEL_NAME"
    done
  done
}

# From the host: K3s routes pod IPs on the node.
engine_serves() {
  local ip
  ip=$(kubectl -n "$NAMESPACE" get pod "$1" -o 'jsonpath={.status.podIP}' 2>/dev/null) || return 1
  [ -n "$ip" ] || return 1
  curl -fsS --max-time 5 "http://$ip:$VLLM_PORT/v1/models" 2>/dev/null |
    python3 -c 'import json, sys; sys.exit(sys.argv[1] not in [m["id"] for m in json.load(sys.stdin)["data"]])' \\
      "$SERVED_MODEL_NAME"
}`,
  );
}

function recordGpuUuids(): BootstrapStep {
  return step(
    'record_gpu_uuids',
    'record the GPU UUID of every replica and check they are distinct',
    `
record_gpu_uuids() {
  local set pod i uuids count duplicates all=() pairs=()
  for set in "\${REPLICA_SETS[@]}"; do
    for ((i = 0; i < REPLICAS; i++)); do
      pod="$set-$i"
      uuids=$(kubectl -n "$NAMESPACE" exec "$pod" -- nvidia-smi -L |
        sed -n -E 's/.*\\(UUID: (GPU-[0-9A-Za-z-]+)\\).*/\\1/p')
      count=$(grep -c . <<<"$uuids" || true)
      [ "$count" -eq 1 ] || die "$pod sees $count GPU(s), expected exactly 1: $uuids"
      log "$pod: $uuids"
      all+=("$uuids")
      pairs+=("$pod=$uuids")
    done
  done
  duplicates=$(printf '%s\\n' "\${all[@]}" | sort | uniq -d)
  [ -z "$duplicates" ] || die "replicas share a physical GPU ($duplicates): each replica must have its own"
  mkdir -p "$RESULTS_DIR/host"
  python3 -c 'import json, sys; print(json.dumps(dict(p.split("=", 1) for p in sys.argv[1:]), indent=2))' \\
    "\${pairs[@]}" >"$RESULTS_DIR/host/gpu-uuids.json"
  GPU_SUMMARY="\${#all[@]} replicas ready on distinct GPUs: \${pairs[*]}"
  log "$GPU_SUMMARY"
}`,
  );
}

function signalSuccess(): BootstrapStep {
  return step(
    'signal_success',
    'signal SUCCESS to the WaitCondition',
    `
signal_success() {
  local data
  data=$(printf '%s; the instance shuts down at %s' "$GPU_SUMMARY" "$(<"$WORK_DIR/deadline")" | head -c 1800 | json_string)
  send_signal SUCCESS '"the lab is ready"' "$data" || die "could not deliver the SUCCESS signal"
  # lab run starts the study only on a ready testbed.
  touch "$READY_MARKER"
  log "lab ready"
  upload_results_now
}`,
  );
}

function main(steps: readonly BootstrapStep[]): string {
  const calls = steps.map((s, i) => `  run_step ${i + 1} ${shellQuote(s.title)} ${s.name}`);
  return `
main() {
  set -Eeuo pipefail
  mkdir -p "$WORK_DIR"
  exec >>"$LOG_FILE" 2>&1
  # Without these nothing can be signalled; the launcher, which sees the exit code, signals instead.
  check_environment
  # Children (kubectl, the installers) need not see the presigned URL.
  export -n WAIT_HANDLE_URL
  trap 'FAILED_COMMAND=$BASH_COMMAND FAILED_LINE=$LINENO' ERR
  trap on_exit EXIT
  trap 'die "stopped by a signal"' TERM INT HUP
  log "lab bootstrap for stack $LAB_STACK_NAME in $LAB_REGION"
${calls.join('\n')}
}
`;
}
