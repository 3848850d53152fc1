#!/bin/bash
# Ends the lab host once its study is over (runner.terminateWhenDone): run every minute by
# lab-terminate-when-done.timer. Quiet until <results>/status.json says finished or failed; then
# it uploads the results and shuts the host down (which terminates it).
set -euo pipefail
# shellcheck source=/dev/null
source "${LAB_SETTINGS:?LAB_SETTINGS must name the bootstrap settings.env}"

[ -f "$STATUS_FILE" ] || exit 0
# The runner renames status.json into place, so a read never sees half a file.
state=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("state", ""))' "$STATUS_FILE") ||
  exit 0
case "$state" in
finished | failed) ;;
*) exit 0 ;;
esac
printf '%s %s\n' "$(date -u +%FT%TZ)" "the study is $state (runner.terminateWhenDone): uploading the results, then terminating" |
  tee -a "$LOG_FILE"
timeout 600 "$SYNC_SCRIPT" || echo "results upload failed; the shutdown hook uploads once more" | tee -a "$LOG_FILE"
shutdown -h now "lab study $state (runner.terminateWhenDone): results uploaded, terminating"
