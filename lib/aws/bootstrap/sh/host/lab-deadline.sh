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
if shutdown -h now "lab lifetime reached (instance.maxLifetimeHours): results uploaded, terminating"; then exit 0; fi
# The timer fires once (OnCalendar= at one instant): a shutdown refused here (logind or D-Bus not
# answering) left the host running, and billing, with nothing to try again. PID 1 directly, then
# the kernel: the results are uploaded, and a power-off from the OS terminates the instance.
say "shutdown -h now failed: powering off through systemd without stopping units, else directly"
systemctl poweroff --force || { sync; poweroff --force --force; }
