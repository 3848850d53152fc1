# shellcheck shell=bash
# Step: arm the cost guard (docs/facts.md §2.3), first, so that nothing later can leave the GPU host
# running. The deadline is an absolute time, kept in DEADLINE_FILE and in a persistent systemd
# timer: `shutdown -h +N` lives in /run and user data runs once, so a reboot would drop it.
# systemd.timer(5): OnCalendar= takes an absolute timestamp; Persistent=true fires a timer whose
# time passed while the machine was down at the next boot.

arm_cost_guard() {
  local deadline on_calendar
  if [ -s "$DEADLINE_FILE" ]; then
    # A second run of the bootstrap (or a reboot) keeps the deadline of the first boot.
    deadline=$(<"$DEADLINE_FILE")
    log "keeping the deadline set at first boot: $deadline"
  else
    if [ "${LOG_CLOCK_CHECK:-}" = '00:00 00:00' ] && [ -n "${EPOCHSECONDS:-}" ]; then
      # bash's own clock, which helpers.sh found honours TZ: date(1) would be a process.
      TZ=UTC0 printf -v deadline '%(%Y-%m-%dT%H:%M:%SZ)T' "$((EPOCHSECONDS + LIFETIME_MINUTES * 60))"
    else
      deadline=$(exec date -u -d "+$LIFETIME_MINUTES minutes" +%Y-%m-%dT%H:%M:%SZ)
    fi
    printf '%s\n' "$deadline" >"$DEADLINE_FILE"
  fi
  write_host_environment
  install_programs lab-aws "$AWS_HELPER" lab-sync-results "$SYNC_SCRIPT" lab-deadline "$DEADLINE_SCRIPT" \
    lab-upload-log "$LOG_UPLOAD_SCRIPT"
  calendar_of on_calendar "$deadline"
  install_deadline_timer "$deadline" "$on_calendar"
  install_results_upload
  install_log_upload
  # One reload for the units of all three, then each started: a reload per unit set was two
  # systemctl processes more per boot (and on a host, each a reload of every unit).
  systemctl daemon-reload
  systemctl enable --now lab-deadline.timer
  end_if_past "$deadline" "$on_calendar"
  # The launcher's plain `shutdown -h +N` (armed before anything could fail) gives way to the
  # timer, which uploads the results first; both aim at the same deadline.
  shutdown -c 'the lab cost guard timer takes over' || log "no pending shutdown to cancel"
  systemctl enable --now lab-results-sync.timer lab-results-final-upload.service
  log "results: $RESULTS_DIR -> s3://$LAB_RESULTS_BUCKET/$LAB_STACK_NAME/$RESULTS_SUBDIR every 5 minutes and at shutdown"
  systemctl enable --now lab-log-upload.timer
  log "bootstrap log: $LOG_LOCATION every $LOG_UPLOAD_MINUTES minutes"
  if ((TERMINATE_WHEN_DONE)); then install_terminate_when_done; fi
  log "the instance uploads the results, shuts down and terminates at $deadline (to extend: edit OnCalendar= in $SYSTEMD_DIR/lab-deadline.timer and the time in $DEADLINE_FILE, then systemctl daemon-reload)"
}

# What the installed programs need beyond settings.env: the stack's bucket, name and region
# (never the WaitCondition URL). Their S3 calls go through lab-aws (curl signs them): no AWS CLI,
# which a Canonical Ubuntu cell does not have; a curl too old to sign fails this step by name.
write_host_environment() {
  local problem
  # lab_aws's command, exec'd: a function in $(...) would be a subshell more.
  problem=$(LAB_SETTINGS="$BOOTSTRAP_DIR/settings.env" exec timeout 900 bash "$BOOTSTRAP_DIR/host/lab-aws.sh" check 2>&1) ||
    die "${problem#lab-aws: } - results could not be uploaded"
  {
    echo '# Written by the lab bootstrap: what its installed programs need beyond settings.env.'
    printf 'LAB_REGION=%q\nLAB_RESULTS_BUCKET=%q\nLAB_STACK_NAME=%q\n' \
      "$LAB_REGION" "$LAB_RESULTS_BUCKET" "$LAB_STACK_NAME"
    # An agent follows its server (lab-follow-server.sh).
    if [ -n "${LAB_SERVER_URL:-}" ]; then printf 'LAB_SERVER_URL=%q\n' "$LAB_SERVER_URL"; fi
  } >"$HOST_ENV_FILE"
}

# install_program <name> <path>: host/<name>.sh from the bootstrap folder, told where the
# settings are.
install_program() { install_programs "$1" "$2"; }

# install_programs <name> <path> [<name> <path>]...: install_program for each, with one chmod for
# them all (a process each was four in step 1).
install_programs() {
  local text paths=()
  while (($# >= 2)); do
    # Read by bash itself, as install_unit does (no cat process); a missing file fails the step.
    { IFS= read -r -d '' text || true; } <"$BOOTSTRAP_DIR/host/$1.sh"
    {
      echo '#!/bin/bash'
      printf '# Installed by the lab bootstrap from %s.\n' "$BOOTSTRAP_DIR/host/$1.sh"
      printf 'export LAB_SETTINGS=%q\n' "$BOOTSTRAP_DIR/settings.env"
      printf '%s' "$text"
    } >"$2"
    paths+=("$2")
    shift 2
  done
  chmod 755 "${paths[@]}"
}

# install_deadline_timer <deadline>: the units of the cost guard's timer, which arm_cost_guard
# loads and starts.
# calendar_of <variable> <deadline>: the deadline as OnCalendar= wants it, "YYYY-MM-DD HH:MM:SS
# UTC": cut by bash from the deadline's own form (the launcher's and arm_cost_guard's), date(1) for
# any other.
calendar_of() {
  if [[ "$2" =~ ^([0-9]{4}-[0-9]{2}-[0-9]{2})T([0-9]{2}:[0-9]{2}:[0-9]{2})Z$ ]]; then
    printf -v "$1" '%s %s UTC' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
  else
    printf -v "$1" '%s UTC' "$(exec date -u -d "$2" '+%Y-%m-%d %H:%M:%S')"
  fi
}

# end_if_past <deadline> <its OnCalendar= form>: a calendar timer whose only time has passed when it
# is first started never fires (docs/facts.md §2.8), so a deadline already behind the clock (one
# corrected forward by more than the lifetime since the launcher set it) ends the host now. Both
# times in the same form: compared as text.
end_if_past() {
  local now
  if [ "${LOG_CLOCK_CHECK:-}" = '00:00 00:00' ]; then
    TZ=UTC0 printf -v now '%(%Y-%m-%d %H:%M:%S)T UTC' -1
  else
    now="$(exec date -u '+%Y-%m-%d %H:%M:%S') UTC"
  fi
  if [[ "$now" < "$2" ]]; then return 0; fi
  log "the deadline $1 has already passed: ending the host now (lab-deadline.service)"
  systemctl start --no-block lab-deadline.service
}

# install_deadline_timer <deadline> <its OnCalendar= form>
install_deadline_timer() {
  install_unit lab-deadline.service <<UNIT
[Unit]
Description=Lab lifetime reached (instance.maxLifetimeHours): upload the results, then shut down and terminate

[Service]
Type=oneshot
ExecStart=$DEADLINE_SCRIPT
UNIT
  install_unit lab-deadline.timer <<UNIT
[Unit]
Description=The lab's cost guard: end the host at $1

[Timer]
OnCalendar=$2
Persistent=true
AccuracySec=1s

[Install]
WantedBy=timers.target
UNIT
}

# Results reach S3 every 5 minutes and once more when the host stops (the deadline too): the
# units, which arm_cost_guard loads and starts.
install_results_upload() {
  make_dir "$RESULTS_DIR"
  install_unit lab-results-sync.service <<UNIT
[Unit]
Description=Upload the lab results to S3
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
ExecStart=$SYNC_SCRIPT
UNIT
  install_unit lab-results-sync.timer <<'UNIT'
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
  install_unit lab-results-final-upload.service <<UNIT
[Unit]
Description=Upload the lab results to S3 before the host stops
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/true
ExecStop=$SYNC_SCRIPT
TimeoutStopSec=600

[Install]
WantedBy=multi-user.target
UNIT
}

# The bootstrap log reaches S3 every LOG_UPLOAD_MINUTES, so a boot that hangs until the
# WaitCondition times out (and the stack rolls back) still leaves its log readable: the units,
# which arm_cost_guard loads and starts.
install_log_upload() {
  install_unit lab-log-upload.service <<UNIT
[Unit]
Description=Upload the lab bootstrap log to S3

[Service]
Type=oneshot
ExecStart=$LOG_UPLOAD_SCRIPT
UNIT
  install_unit lab-log-upload.timer <<UNIT
[Unit]
Description=Upload the lab bootstrap log to S3 every $LOG_UPLOAD_MINUTES minutes

[Timer]
OnActiveSec=${LOG_UPLOAD_MINUTES}min
OnUnitActiveSec=${LOG_UPLOAD_MINUTES}min

[Install]
WantedBy=timers.target
UNIT
}

# runner.terminateWhenDone: a timer checks status.json every minute; a finished or failed study
# uploads the results and shuts the host down.
install_terminate_when_done() {
  install_program lab-terminate-when-done "$DONE_SCRIPT"
  minute_timer lab-terminate-when-done \
    'Upload the lab results and terminate the host once the study is over (runner.terminateWhenDone)' "$DONE_SCRIPT"
  log "runner.terminateWhenDone: the host uploads the results and terminates once status.json says finished or failed"
}
