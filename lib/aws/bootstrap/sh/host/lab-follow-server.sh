#!/bin/bash
# A K3s agent ends with its server (every host of a lab ends together): run every minute by
# lab-follow-server.timer once the agent joined. Any HTTP answer on the server's K3s port counts
# as "up" (even a 401); no answer SERVER_GONE_MINUTES runs in a row means the server ended (its
# deadline, runner.terminateWhenDone, a person): the agent uploads its results and shuts down,
# which terminates it (the launch template's shutdown behaviour).
set -euo pipefail
# shellcheck source=/dev/null
source "${LAB_SETTINGS:?LAB_SETTINGS must name the bootstrap settings.env}"
# shellcheck source=/dev/null
source "$HOST_ENV_FILE"
# The count of misses in a row, in the service's /run folder (minute_timer): on the disk, a count
# that could not be written (disk full or read-only) ended this script under set -e every minute,
# and the agent never ended with its server.
misses_file="${RUNTIME_DIRECTORY:-$WORK_DIR}/server-misses"
if curl -sk --max-time 10 -o /dev/null "$LAB_SERVER_URL/ping"; then
  rm -f "$misses_file"
  exit 0
fi
misses=$(($(cat "$misses_file" 2>/dev/null || echo 0) + 1))
echo "$misses" >"$misses_file"
# Best effort: a log line that cannot be written (a full disk) must not keep the agent from ending.
say() { printf '%s %s\n' "$(date -u +%FT%TZ)" "$*" | tee -a "$LOG_FILE" || true; }
if [ "$misses" -lt "$SERVER_GONE_MINUTES" ]; then
  say "the K3s server $LAB_SERVER_URL did not answer ($misses of $SERVER_GONE_MINUTES in a row before this agent ends)"
  exit 0
fi
say "the K3s server $LAB_SERVER_URL has not answered for $misses minutes: it ended, so this agent uploads its results and terminates"
timeout 600 "$SYNC_SCRIPT" || say "results upload failed; the shutdown hook uploads once more"
shutdown -h now "the lab's K3s server ended: this agent ends with it"
