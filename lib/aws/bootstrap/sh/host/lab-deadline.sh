#!/bin/bash
# The cost guard (lab-deadline.timer, at the absolute deadline of instance.maxLifetimeHours):
# uploads the results and the log, then shuts the host down, which terminates it (the launch
# template's instance-initiated shutdown behaviour).
set -euo pipefail
# shellcheck source=/dev/null
source "${LAB_SETTINGS:?LAB_SETTINGS must name the bootstrap settings.env}"
# Nothing before the shutdown may end this script: under set -e a failed log line (tee on a full
# disk) or mkdir would, and the host would run on past its deadline. So each is best effort.
say() { printf '%s %s\n' "$(date -u +%FT%TZ)" "$*" | tee -a "$LOG_FILE" || true; }
say "lab lifetime reached (instance.maxLifetimeHours, deadline $(cat "$DEADLINE_FILE" 2>/dev/null || echo unknown)): uploading the results, then terminating"
{ mkdir -p "$RESULTS_DIR/host" && cp "$LOG_FILE" "$RESULTS_DIR/host/bootstrap.log"; } || true
timeout 600 "$SYNC_SCRIPT" || say "results upload failed; the shutdown hook uploads once more"
timeout 120 "$LOG_UPLOAD_SCRIPT" || say "log upload failed"
shutdown -h now "lab lifetime reached (instance.maxLifetimeHours): results uploaded, terminating"
