# shellcheck shell=bash
# Step: SUCCESS to the WaitCondition; `cdk deploy` returns once it arrives.

signal_success() {
  local summary data
  printf -v summary '%s; the instance shuts down at %s' "$READY_SUMMARY" "$(<"$DEADLINE_FILE")"
  json_string data "${summary:0:1800}"
  send_signal SUCCESS '"the lab is ready"' "$data" || die "could not deliver the SUCCESS signal"
  # lab run starts the study only on a ready testbed.
  : >"$READY_MARKER"
  log "lab ready"
  upload_log_and_results
}
