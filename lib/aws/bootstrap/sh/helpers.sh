# shellcheck shell=bash
# Helpers of the lab bootstrap: logging, failing a step, bounded waits, step budgets, the
# WaitCondition signal and the uploads of the log and the results. Sourced by main.sh after
# settings.env, which lib/aws/bootstrap/settings.ts renders from the lab configuration.

# A line of the log, stamped in UTC. A bootstrap logs a hundred lines, and date(1) is a process
# each: bash's own printf formats the time (%(...)T, bash 4.2+) when this bash honours TZ given to
# the builtin, checked once here on two instants whose UTC time is known (epoch 0 and a summer
# one: 00:00 both). Otherwise (a local time zone it cannot override) date(1) stamps the lines.
if TZ=UTC0 printf -v LOG_CLOCK_CHECK '%(%H:%M)T %(%H:%M)T' 0 15552000 2>/dev/null &&
  [ "$LOG_CLOCK_CHECK" = '00:00 00:00' ]; then
  log() { TZ=UTC0 printf '%(%Y-%m-%dT%H:%M:%SZ)T %s\n' -1 "$*"; }
else
  log() { printf '%s %s\n' "$(date -u +%FT%TZ)" "$*"; }
fi

# Fails the current step with a message; the EXIT trap signals FAILURE.
die() {
  FAILURE_DETAIL=$*
  log "ERROR: $*"
  exit 1
}

# Seconds left of the current step's budget (0 when it is spent).
budget_left() {
  local left=$((STEP_DEADLINE - SECONDS))
  if ((left < 0)); then left=0; fi
  printf '%s\n' "$left"
}

# wait_until <seconds> <command...>: runs the command every 5 s until it succeeds; 1 on timeout.
# Never waits past the step's budget (STEP_DEADLINE, read directly: `$(budget_left)` is a process).
wait_until() {
  local limit=$1 deadline
  shift
  deadline=$((SECONDS + limit))
  if ((deadline > STEP_DEADLINE)); then deadline=$STEP_DEADLINE; fi
  until "$@"; do
    if ((SECONDS >= deadline)); then return 1; fi
    sleep "$WAIT_INTERVAL_SECONDS"
  done
}

# within_budget <command...>: the command, ended when the step's budget runs out.
within_budget() {
  local left=$((STEP_DEADLINE - SECONDS))
  if ((left < 0)); then left=0; fi
  timeout "$left" "$@"
}

# The watchdog of one step: when the budget is spent it ends the step's commands and the bootstrap,
# whose TERM trap reports the step as over budget. A step's own waits stop at the budget first.
# It waits in bash's own `read -t` on a pipe that nobody writes to (opened read-write once per
# bootstrap, so it never reaches end-of-file), not in a sleep(1) process per step.
start_watchdog() {
  local budget=$1 pid=$$
  if [ -z "${WATCHDOG_PIPE:-}" ]; then exec {WATCHDOG_PIPE}<> <(:); fi
  (
    # Ended quietly by anyone else's TERM (a shutdown's); stop_watchdog itself uses KILL.
    trap 'exit 0' TERM
    # Only the timeout ends the read. A line cannot come; were the pipe broken, the read would
    # fail at once and every step with it, loudly.
    if read -r -t "$budget" -u "$WATCHDOG_PIPE"; then exit 0; fi
    # Best effort: this subshell inherits set -e, and a marker that cannot be written (a disk full
    # or remounted read-only) ended it here, leaving the step to hang unbounded. Without the
    # marker the step still fails, as "stopped by a signal".
    touch "$WORK_DIR/over-budget" 2>/dev/null || true
    # Bash runs the TERM trap only once its foreground command ends: end that command too, and
    # everything below it. A command substitution or a pipeline in a subshell runs its commands
    # as grandchildren, and bash reads a command substitution to its end: one hanging grandchild
    # (a kubectl exec in `uuids=$(kubectl exec ... | sed ...)`) kept the bootstrap from its trap
    # until it ended, if ever, long after the budget.
    kill -TERM "$pid" 2>/dev/null || true
    list_descendants "$pid" "$BASHPID"
    for child in "${DESCENDANTS[@]}"; do kill -TERM "$child" 2>/dev/null || true; done
  ) &
  WATCHDOG_PID=$!
}

# list_descendants <pid> <skip>: every process below <pid>, except <skip> and those below it, into
# DESCENDANTS (one listing of the process table, walked by bash).
list_descendants() {
  local child parent i=0 queue=("$1")
  local -A below=()
  DESCENDANTS=()
  while read -r child parent; do below[$parent]+=" $child"; done < <(ps -e -o pid=,ppid=)
  while ((i < ${#queue[@]})); do
    for child in ${below[${queue[i]}]:-}; do
      if [ "$child" != "$2" ]; then
        queue+=("$child")
        DESCENDANTS+=("$child")
      fi
    done
    i=$((i + 1))
  done
}

# KILL, not TERM: a TERM that reaches the subshell before its trap is set can be lost (bash 5.2
# lost about 1 in 150 when the stop came right after the start, as after a step with nothing to
# do). The watchdog then read out its budget while the bootstrap waited for it, and ended the
# bootstrap as over budget although its step had finished.
stop_watchdog() {
  if [ -n "${WATCHDOG_PID:-}" ]; then
    kill -KILL "$WATCHDOG_PID" 2>/dev/null || true
    wait "$WATCHDOG_PID" 2>/dev/null || true
    WATCHDOG_PID=''
  fi
}

# run_step <index>: runs STEP_NAMES[index] within STEP_BUDGETS[index] seconds, with its marker.
run_step() {
  local i=$1
  CURRENT_STEP="[step $((i + 1))/${#STEP_NAMES[@]}] ${STEP_TITLES[$i]}"
  CURRENT_BUDGET=${STEP_BUDGETS[$i]}
  STEP_DEADLINE=$((SECONDS + CURRENT_BUDGET))
  log "==> $CURRENT_STEP (budget $((CURRENT_BUDGET / 60)) min $((CURRENT_BUDGET % 60)) s)"
  start_watchdog "$CURRENT_BUDGET"
  "${STEP_NAMES[$i]}"
  stop_watchdog
}

on_term() {
  if [ -e "$WORK_DIR/over-budget" ]; then
    die "the step ran out of its budget of $((CURRENT_BUDGET / 60)) min $((CURRENT_BUDGET % 60)) s (the step budgets share instance.readyTimeoutMinutes)"
  fi
  die "stopped by a signal"
}

# Prints stdin as a JSON string literal. It keeps printable ASCII, tabs and newlines only (a log
# tail may hold colour codes or cut UTF-8), so the signal body is valid JSON whatever the log
# holds. Escaping at most doubles the length: callers cut the input.
json_string() {
  local text
  text=$(LC_ALL=C tr -cd '\11\12\40-\176' | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/\\t/g' |
    awk 'NR > 1 { printf "\\n" } { printf "%s", $0 }')
  printf '"%s"' "$text"
}

# send_signal <status> <reason as JSON> <data as JSON>: PUT to the WaitCondition handle. --fail
# makes an HTTP error (an expired or wrong presigned URL answers 403) a failed delivery, retried
# SIGNAL_ATTEMPTS times; only a delivered signal sets SIGNALLED_MARKER. The URL is never logged.
send_signal() {
  local body="$WORK_DIR/signal.json" attempt
  printf '{"Status":"%s","Reason":%s,"UniqueId":"%s","Data":%s}\n' "$1" "$2" "$SIGNAL_UNIQUE_ID" "$3" >"$body"
  for ((attempt = 1; attempt <= SIGNAL_ATTEMPTS; attempt++)); do
    if curl -sS --fail --max-time 60 -X PUT -H 'Content-Type:' --data-binary "@$body" "$WAIT_HANDLE_URL" >/dev/null; then
      touch "$SIGNALLED_MARKER"
      log "the $1 signal reached the WaitCondition"
      return 0
    fi
    log "the $1 signal was not accepted (attempt $attempt of $SIGNAL_ATTEMPTS)"
    if ((attempt < SIGNAL_ATTEMPTS)); then sleep "$SIGNAL_RETRY_SECONDS"; fi
  done
  log "could not deliver the $1 signal to the WaitCondition"
  return 1
}

# Where the bootstrap log is readable from outside the host, named in every failure reason.
log_location() {
  printf 's3://%s/%s/%s%s\n' "$LAB_RESULTS_BUCKET" "$LAB_STACK_NAME" "$RESULTS_SUBDIR" "$LOG_OBJECT"
}

# lab_aws [--within <seconds>] <command> <arguments...>: the S3 and Secrets Manager calls, signed
# by curl with the instance role's keys (host/lab-aws.sh: no AWS CLI needed), ended after
# <seconds> (15 min unless given). The bootstrap runs it from its own folder, so it works before
# step 1 installs it for the host's programs.
lab_aws() {
  local seconds=900
  if [ "$1" = --within ]; then
    seconds=$2
    shift 2
  fi
  LAB_SETTINGS="$BOOTSTRAP_DIR/settings.env" timeout "$seconds" bash "$BOOTSTRAP_DIR/host/lab-aws.sh" "$@"
}

# Uploads the bootstrap log now (best effort): a failed or timed-out boot stays readable.
upload_log() {
  lab_aws --within 120 put "$LOG_FILE" "$(log_location)" || log "could not upload $LOG_FILE to $(log_location)"
}

# install_unit <file name>: the unit's text from stdin into SYSTEMD_DIR (read by bash itself: a
# bootstrap writes a dozen units, and cat would be a process each).
install_unit() {
  local text
  IFS= read -r -d '' text || true
  printf '%s' "$text" >"$SYSTEMD_DIR/$1"
}

# minute_timer <name> <description> <program>: a systemd service running <program> and a timer
# starting it every minute from one minute on, enabled now (terminate-when-done, follow-server).
minute_timer() {
  install_unit "$1.service" <<UNIT
[Unit]
Description=$2

[Service]
Type=oneshot
ExecStart=$3
UNIT
  install_unit "$1.timer" <<UNIT
[Unit]
Description=Every minute: $2

[Timer]
OnActiveSec=1min
OnUnitActiveSec=1min

[Install]
WantedBy=timers.target
UNIT
  systemctl daemon-reload
  systemctl enable --now "$1.timer"
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
  trap - ERR EXIT TERM INT HUP
  set +e
  stop_watchdog
  if [ "$rc" -eq 0 ]; then return 0; fi
  detail=${FAILURE_DETAIL:-"exit code $rc from: $FAILED_COMMAND (line $FAILED_LINE)"}
  log "FAILED $CURRENT_STEP: $detail"
  # A small reason: CloudFormation shows it in the stack events, and keeps 4 KB at most.
  reason=$({
    printf '%s failed: %s' "$CURRENT_STEP" "$detail" | head -c 500
    printf '\nfull log: %s\n--- last lines of %s:\n' "$(log_location)" "$LOG_FILE"
    tail -n 20 "$LOG_FILE" | tail -c 1200
  } | json_string)
  data=$(printf '%s' "$CURRENT_STEP" | json_string)
  send_signal FAILURE "$reason" "$data"
  upload_log
  upload_results_now
  exit "$rc"
}

check_environment() {
  local name missing=()
  for name in "${REQUIRED_ENVIRONMENT[@]}"; do
    if [ -z "${!name:-}" ]; then missing+=("$name"); fi
  done
  if ((${#missing[@]} > 0)); then
    log "ERROR: environment variables missing: ${missing[*]} (the user-data launcher sets them)"
    exit 2
  fi
}

# output_matches <ERE> <command> [args...]: whether the command succeeds and its output matches.
# The output is captured first: under pipefail, `command | grep -q` fails at random when grep
# exits at its first match and the command then dies of SIGPIPE while still writing.
output_matches() {
  local out
  out=$("${@:2}") || return 1
  grep -Eq -- "$1" <<<"$out"
}
