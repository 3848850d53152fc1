#!/bin/bash
# The lab bootstrap (docs/facts.md §2.2, 2.3): turns a fresh Deep Learning AMI into the lab - K3s with
# the nvidia runtime, the synthesized manifests, the model in the shared cache, replicas serving
# on distinct GPUs - and signals the stack's WaitCondition.
#
# The user-data launcher unpacks the bootstrap folder (this file, helpers.sh, steps/, host/ and
# settings.env, which lib/aws/bootstrap/settings.ts renders from the lab configuration) and runs
# `bash main.sh` with WAIT_HANDLE_URL, LAB_REGION, LAB_RESULTS_BUCKET, LAB_STACK_NAME and
# LAB_MANIFESTS_DIR set. LAB_MANIFESTS_DIR is the synthesized cluster folder: NN-*.yaml (applied in
# file-name order), prerequisites.json (third-party manifests, applied first) and jobs/ (never
# applied). Every step is logged to LOG_FILE with a marker and runs within its budget; a failure
# signals FAILURE with the step, where the full log is, and the log tail. WAIT_HANDLE_URL is never
# logged.

# The folder of this file, absolute: cut by bash itself (dirname would be one more process) and
# resolved by a cd there and back in this shell, as `$(cd "$BOOTSTRAP_DIR" && pwd)` resolved it
# in a subshell (a process on every boot).
BOOTSTRAP_DIR=.
if [[ "${BASH_SOURCE[0]}" == */* ]]; then BOOTSTRAP_DIR=${BASH_SOURCE[0]%/*}; fi
CDPATH='' cd "$BOOTSTRAP_DIR" && BOOTSTRAP_DIR=$PWD && cd "$OLDPWD"
# shellcheck source=/dev/null
source "$BOOTSTRAP_DIR/settings.env"
# shellcheck source=helpers.sh
source "$BOOTSTRAP_DIR/helpers.sh"
for step_file in "$BOOTSTRAP_DIR"/steps/*.sh; do
  # shellcheck source=/dev/null
  source "$step_file"
done

export KUBECONFIG
# cloud-init may start the script without HOME; helm and the AWS CLI keep state under it.
export HOME="${HOME:-/root}"
# Byte order for globs, so NN-*.yaml apply in the order synth numbered them.
export LC_ALL=C
# K3s puts kubectl in /usr/local/bin; appended, so the PATH given to the script wins.
export PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
shopt -s nullglob

CURRENT_STEP='before the first step'
CURRENT_BUDGET=0
STEP_DEADLINE=$SECONDS
WATCHDOG_PID=''
# The pipe the watchdog waits on (start_watchdog opens it).
WATCHDOG_PIPE=''
LOG_LOCATION=''
FAILURE_DETAIL=''
FAILED_COMMAND=''
FAILED_LINE=''
# shellcheck disable=SC2034 # set by record_gpu_uuids, read by signal_success (steps/)
READY_SUMMARY=''

main() {
  set -Eeuo pipefail
  # The launcher made it (it writes the deadline there first): mkdir only on a host where it did not.
  make_dir "$WORK_DIR"
  if [ -e "$WORK_DIR/over-budget" ]; then rm -f "$WORK_DIR/over-budget"; fi
  exec >>"$LOG_FILE" 2>&1
  # Without these nothing can be signalled; the launcher, which sees the exit code, signals instead.
  check_environment
  set_log_location
  # Children (kubectl, the installers) need not see the presigned URL.
  export -n WAIT_HANDLE_URL
  trap 'FAILED_COMMAND=$BASH_COMMAND FAILED_LINE=$LINENO' ERR
  trap on_exit EXIT
  trap on_term TERM INT HUP
  log "lab bootstrap for stack $LAB_STACK_NAME in $LAB_REGION (log: $LOG_LOCATION)"
  local i
  for ((i = 0; i < ${#STEP_NAMES[@]}; i++)); do
    run_step "$i"
  done
}

# Run when executed; when sourced (tests), only define the functions.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then main "$@"; fi
