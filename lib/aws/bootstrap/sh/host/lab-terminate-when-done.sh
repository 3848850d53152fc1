#!/bin/bash
# Ends the lab host once its study is over (runner.terminateWhenDone): run every minute by
# lab-terminate-when-done.timer. Quiet until <results>/status.json says finished or failed (a smoke
# study that failed a proof, or a full study stopped by its smoke checks, is one of them). Then it
# uploads the results folder, with the smoke checklist and the runner log in it, and shuts the host
# down (which terminates it) only once that upload succeeded: a user must be able to read why the
# study ended after the host is gone (lab status reads them from the bucket). A failed upload is
# tried again each minute; after UPLOAD_RETRY_MINUTES the host ends anyway, so nothing is left
# billing (the shutdown hook uploads once more, and lab status says what is missing).
set -euo pipefail
# shellcheck source=/dev/null
source "${LAB_SETTINGS:?LAB_SETTINGS must name the bootstrap settings.env}"
readonly UPLOAD_RETRY_MINUTES=15
# When the first failed upload of this study's end happened (epoch seconds): beside the results
# folder (/var/lib/lab), not in it, so it is never uploaded.
readonly RETRY_MARKER=${TERMINATE_RETRY_MARKER:-$(dirname "$(dirname "$STATUS_FILE")")/terminate-upload-retry}

# Best effort: a log line that cannot be written (a full disk) must not keep the host from ending.
log() { printf '%s %s\n' "$(date -u +%FT%TZ)" "$1" | tee -a "$LOG_FILE" || true; }

[ -f "$STATUS_FILE" ] || exit 0
# The runner renames status.json into place, so a read never sees half a file.
state=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("state", ""))' "$STATUS_FILE") ||
  exit 0
case "$state" in
finished | failed) ;;
*) exit 0 ;;
esac
log "the study is $state (runner.terminateWhenDone): uploading the results, the smoke checklist and the runner log, then terminating"
if timeout 600 "$SYNC_SCRIPT"; then
  rm -f "$RETRY_MARKER"
  log "results uploaded: terminating"
  shutdown -h now "lab study $state (runner.terminateWhenDone): results uploaded, terminating"
  exit 0
fi
now=$(date +%s)
# Where the first failure cannot be recorded (the disk full, or remounted read-only: a likely
# reason for the failed upload too), set -e ended the script here every minute and the host ran
# on until its deadline: it cannot wait out the retries, so it ends now.
if ! { [ -f "$RETRY_MARKER" ] || echo "$now" >"$RETRY_MARKER"; } 2>/dev/null; then
  log "the results upload failed and $RETRY_MARKER cannot be written: terminating now rather than retrying without a record; the shutdown hook uploads once more"
  shutdown -h now "lab study $state (runner.terminateWhenDone): results upload failing, terminating"
  exit 0
fi
since=$(cat "$RETRY_MARKER")
if [ $((now - since)) -lt $((UPLOAD_RETRY_MINUTES * 60)) ]; then
  log "the results upload failed: the host stays up and tries again in a minute (for up to $UPLOAD_RETRY_MINUTES minutes), so the checklist and the runner log reach the bucket first"
  exit 0
fi
log "the results upload has failed for $UPLOAD_RETRY_MINUTES minutes: terminating anyway so that nothing is left billing; the shutdown hook uploads once more, and lab status names what did not reach the bucket"
shutdown -h now "lab study $state (runner.terminateWhenDone): results upload failing, terminating"
