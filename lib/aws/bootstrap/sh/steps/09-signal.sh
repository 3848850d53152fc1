# shellcheck shell=bash
# Step: SUCCESS to the WaitCondition; `cdk deploy` returns once it arrives.

signal_success() {
  local data
  data=$(printf '%s; the instance shuts down at %s' "$READY_SUMMARY" "$(<"$DEADLINE_FILE")" | head -c 1800 | json_string)
  send_signal SUCCESS '"the lab is ready"' "$data" || die "could not deliver the SUCCESS signal"
  # lab run starts the study only on a ready testbed.
  touch "$READY_MARKER"
  log "lab ready"
  upload_log
  upload_results_now
}
