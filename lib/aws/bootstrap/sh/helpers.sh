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

# On the boot path a command substitution of one command reads `$(exec command)`: main.sh's ERR
# trap (set -E) reaches every $(...), and bash then forks a subshell and the command, two
# processes; with exec, one.

# make_dir <folder>: mkdir -p, only when the folder is not there yet (a boot makes a dozen that a
# step before, or the boot before, already made; mkdir is a process each).
make_dir() {
  if [ ! -d "$1" ]; then mkdir -p "$1"; fi
}

# count_matches <folder> <name pattern>: into MATCHES, how many paths under the folder, at any
# depth, have a name matching the pattern, as `find <folder> -name <pattern> | wc -l` counts them
# (hidden ones too), by bash's globstar: find and wc were two processes and a subshell. Unlike find,
# globstar follows links to folders: the folders counted (the restored studies, the wheelhouse)
# hold the plain files lab-aws and pip write.
count_matches() {
  local found=() unset_after=() option
  for option in globstar dotglob nullglob; do
    if ! shopt -q "$option"; then unset_after+=("$option"); fi
  done
  shopt -s globstar dotglob nullglob
  # shellcheck disable=SC2206 # $2 is a pattern, to be matched
  found=("$1"/**/$2)
  if ((${#unset_after[@]} > 0)); then shopt -u "${unset_after[@]}"; fi
  # shellcheck disable=SC2034 # read by the steps
  MATCHES=${#found[@]}
}

# Fails the current step with a message; the EXIT trap signals FAILURE.
die() {
  FAILURE_DETAIL=$*
  log "ERROR: $*"
  exit 1
}

# The seconds left of the current step's budget (0 when it is spent), as an arithmetic expression
# that bash evaluates itself: `$((BUDGET_LEFT))`. A function printing it, `$(budget_left)`, was a
# process per use.
# shellcheck disable=SC2034 # read by the steps, as $((BUDGET_LEFT))
BUDGET_LEFT='STEP_DEADLINE > SECONDS ? STEP_DEADLINE - SECONDS : 0'

# wait_until <seconds> <command...>: runs the command every 5 s until it succeeds; 1 on timeout.
# Never waits past the step's budget (STEP_DEADLINE).
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

# within_budget <command...>: the command, ended when the step's budget runs out; with nothing
# left, not run at all (124, timeout's own code): `timeout 0` means no limit (coreutils timeout(1)),
# and a background pull that outlived its step ran unbounded.
within_budget() {
  local left=$((STEP_DEADLINE - SECONDS))
  if ((left <= 0)); then return 124; fi
  timeout "$left" "$@"
}

# The bootstrap's watchdog: one process for the whole run, armed with each step's budget by
# run_step and disarmed at the step's end. When a budget runs out first it ends the step's
# commands and the bootstrap, whose TERM trap reports the step as over budget. A step's own waits
# stop at the budget first. It waits in bash's own `read -t` on a pipe that only run_step writes
# to (opened read-write, so it never reaches end-of-file): a line is the next step's budget, an
# empty line "no step running". One process per bootstrap, not a subshell per step: every
# process costs on every boot.
start_watchdog() {
  if [ -z "${WATCHDOG_PID:-}" ]; then
    exec {WATCHDOG_PIPE}<> <(:)
    watchdog "$$" &
    WATCHDOG_PID=$!
  fi
  printf '%s\n' "$1" >&"$WATCHDOG_PIPE"
}

# The step has ended within its budget: the watchdog waits for the next one without a limit.
stop_watchdog() {
  if [ -n "${WATCHDOG_PID:-}" ]; then printf '\n' >&"$WATCHDOG_PIPE"; fi
}

# watchdog <bootstrap pid>: the watchdog's loop (in its own process).
watchdog() {
  local pid=$1 budget='' child
  # Ended quietly by anyone else's TERM (a shutdown's); end_watchdog itself uses KILL.
  trap 'exit 0' TERM
  while :; do
    if [ -z "$budget" ]; then
      # No step running: only the next budget ends this read.
      if read -r -u "$WATCHDOG_PIPE" budget; then continue; fi
    elif read -r -t "$budget" -u "$WATCHDOG_PIPE" budget; then
      continue
    fi
    # The budget ran out (or the pipe broke, which would fail every step, loudly).
    break
  done
  # Best effort: this process inherits set -e, and a marker that cannot be written (a disk full
  # or remounted read-only) ended it here, leaving the step to hang unbounded. Without the
  # marker the step still fails, as "stopped by a signal".
  touch "$WORK_DIR/over-budget" 2>/dev/null || true
  # Bash runs the TERM trap only once its foreground command ends: end that command too, and
  # everything below it. A command substitution or a pipeline in a subshell runs its commands
  # as grandchildren, and bash reads a command substitution to its end: one hanging grandchild
  # (a kubectl exec in `uuids=$(kubectl exec ... | sed ...)`, as record_gpu_uuids once read the
  # UUIDs) kept the bootstrap from its trap until it ended, if ever, long after the budget.
  kill -TERM "$pid" 2>/dev/null || true
  list_descendants "$pid" "$BASHPID"
  for child in "${DESCENDANTS[@]}"; do kill -TERM "$child" 2>/dev/null || true; done
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

# end_descendants <pid>: TERM to every process below <pid>. Each listing's processes are stopped
# first, and the tree listed again until no new process appears: a process that forks between a
# listing and its TERM leaves a child that its death hands to init, out of any later listing's reach.
# (Each listing holds its own ps too: the count, not the set, tells when the tree stopped growing.)
end_descendants() {
  local pid all=() count=-1 round
  for ((round = 0; round < 5; round++)); do
    list_descendants "$1" ''
    if ((${#DESCENDANTS[@]} <= count)); then break; fi
    count=${#DESCENDANTS[@]}
    all+=("${DESCENDANTS[@]}")
    kill -STOP "${DESCENDANTS[@]}" 2>/dev/null || true
  done
  for pid in "${all[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
    kill -CONT "$pid" 2>/dev/null || true
  done
}

# Ends the watchdog when the bootstrap exits. KILL, not TERM: a TERM that reaches the subshell
# before its trap is set can be lost (bash 5.2 lost about 1 in 150 when the TERM came right after
# the start); the bootstrap would then wait for a watchdog that reads out its budget.
end_watchdog() {
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

# json_string <variable> <text>: sets the variable to the text as a JSON string literal. It keeps
# printable ASCII, tabs and newlines only (a log tail may hold colour codes or cut UTF-8), so the
# signal body is valid JSON whatever the log holds; one final newline ends the text, as a line
# does, and is not kept. Escaping at most doubles the length: callers cut the text. Done by bash
# itself (main.sh sets LC_ALL=C, so classes and cuts are by byte): tr, sed and awk were three
# processes per signal. A NUL byte cannot reach it (bash drops them): callers pass a log's bytes
# through `tr -cd` first.
json_string() {
  local _text=$2
  _text=${_text//[![:print:]$'\t\n']/}
  _text=${_text%$'\n'}
  _text=${_text//\\/\\\\}
  _text=${_text//\"/\\\"}
  _text=${_text//$'\t'/\\t}
  _text=${_text//$'\n'/\\n}
  printf -v "$1" '"%s"' "$_text"
}

# json_object <indent: 0 or 2> [<key> <value>]...: prints a JSON object of string values as
# python3's json.dumps prints it (indent 2: a member a line). Printable ASCII, what the host's
# JSON files hold (instance types, versions, pod names, GPU UUIDs, paths), is escaped by bash
# itself: a python3 start each cost more than the rest of their step. Anything else goes to
# json.dumps, whose escapes (\uXXXX) are its own.
json_object() {
  local indent=$1 key value member members=() out sep=', ' open='{' close='}'
  shift
  if [[ "$*" == *[![:print:]]* ]]; then
    python3 -c 'import json, sys
a = sys.argv[2:]
print(json.dumps(dict(zip(a[::2], a[1::2])), indent=int(sys.argv[1]) or None))' "$indent" "$@"
    return
  fi
  while (($# >= 2)); do
    key=${1//\\/\\\\}
    value=${2//\\/\\\\}
    members+=("\"${key//\"/\\\"}\": \"${value//\"/\\\"}\"")
    shift 2
  done
  if ((${#members[@]} == 0)); then
    printf '{}\n'
    return 0
  fi
  if ((indent)); then sep=$',\n  ' open=$'{\n  ' close=$'\n}'; fi
  out=${members[0]}
  for member in "${members[@]:1}"; do out+=$sep$member; done
  printf '%s%s%s\n' "$open" "$out" "$close"
}

# send_signal <status> <reason as JSON> <data as JSON>: PUT to the WaitCondition handle. --fail
# makes an HTTP error (an expired or wrong presigned URL answers 403) a failed delivery, retried
# SIGNAL_ATTEMPTS times; only a delivered signal sets SIGNALLED_MARKER. The URL is never logged.
send_signal() {
  local body="$WORK_DIR/signal.json" attempt
  printf '{"Status":"%s","Reason":%s,"UniqueId":"%s","Data":%s}\n' "$1" "$2" "$SIGNAL_UNIQUE_ID" "$3" >"$body"
  for ((attempt = 1; attempt <= SIGNAL_ATTEMPTS; attempt++)); do
    if curl -sS --fail --max-time 60 -X PUT -H 'Content-Type:' --data-binary "@$body" "$WAIT_HANDLE_URL" >/dev/null; then
      : >"$SIGNALLED_MARKER"
      log "the $1 signal reached the WaitCondition"
      return 0
    fi
    log "the $1 signal was not accepted (attempt $attempt of $SIGNAL_ATTEMPTS)"
    # No pause of 0 s (a sleep process that waits for nothing).
    if ((attempt < SIGNAL_ATTEMPTS)) && [ "$SIGNAL_RETRY_SECONDS" != 0 ]; then sleep "$SIGNAL_RETRY_SECONDS"; fi
  done
  log "could not deliver the $1 signal to the WaitCondition"
  return 1
}

# Where the bootstrap log is readable from outside the host, named in every failure reason: set
# into LOG_LOCATION once the environment is checked (main.sh), read as a variable after that.
set_log_location() {
  printf -v LOG_LOCATION 's3://%s/%s/%s%s' "$LAB_RESULTS_BUCKET" "$LAB_STACK_NAME" "$RESULTS_SUBDIR" "$LOG_OBJECT"
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
  lab_aws --within 120 put "$LOG_FILE" "$LOG_LOCATION" || log "could not upload $LOG_FILE to $LOG_LOCATION"
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
# The service gets /run/<name> (RUNTIME_DIRECTORY, on tmpfs, kept between runs until a reboot:
# systemd.exec(5) RuntimeDirectory=, RuntimeDirectoryPreserve=) for state that a full or read-only
# disk must not refuse.
minute_timer() {
  install_unit "$1.service" <<UNIT
[Unit]
Description=$2

[Service]
Type=oneshot
ExecStart=$3
RuntimeDirectory=$1
RuntimeDirectoryPreserve=yes
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

# The log and the results, uploaded now (best effort), at the bootstrap's end. The results sync
# puts the log's copy (results host/bootstrap.log, a new file each time) at the log's own key,
# LOG_LOCATION ($RESULTS_SUBDIR$LOG_OBJECT under the stack's prefix, the sync's too): an upload of
# the log before it put the same object, a lab-aws call (about a dozen processes) for nothing. The
# log alone goes up when there is no sync program yet (step 1 did not install it) or the sync failed.
upload_log_and_results() {
  if [ ! -x "$SYNC_SCRIPT" ]; then
    upload_log
    return 0
  fi
  make_dir "$RESULTS_DIR/host"
  cp "$LOG_FILE" "$RESULTS_DIR/host/bootstrap.log" || true
  if ! timeout 300 "$SYNC_SCRIPT"; then
    log "results upload failed; the timer and the shutdown hook retry"
    upload_log
  fi
}

on_exit() {
  local rc=$? detail text tail_text reason data
  trap - ERR EXIT TERM INT HUP
  set +e
  end_watchdog
  if [ "$rc" -eq 0 ]; then return 0; fi
  # Nothing of a failed bootstrap runs on after it: a step that died with work in the background
  # (prefetch's image pulls and wheelhouse) left it running, still writing to the log and to the
  # scratch folders a second run of the bootstrap would use.
  end_descendants "$$"
  detail=${FAILURE_DETAIL:-"exit code $rc from: $FAILED_COMMAND (line $FAILED_LINE)"}
  log "FAILED $CURRENT_STEP: $detail"
  # A small reason: CloudFormation shows it in the stack events, and keeps 4 KB at most.
  printf -v text '%s failed: %s' "$CURRENT_STEP" "$detail"
  # The log's last lines, without NUL bytes (bash would drop them, and warn into the log); `x`
  # keeps the command substitution from taking the final newlines.
  tail_text=$(tail -n 20 "$LOG_FILE" | tail -c 1200 | tr -cd '\11\12\40-\176'; printf x)
  printf -v text '%s\nfull log: %s\n--- last lines of %s:\n%s' "${text:0:500}" "$LOG_LOCATION" "$LOG_FILE" "${tail_text%x}"
  json_string reason "$text"
  json_string data "$CURRENT_STEP"
  send_signal FAILURE "$reason" "$data"
  upload_log_and_results
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
