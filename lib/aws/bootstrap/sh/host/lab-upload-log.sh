#!/bin/bash
# Uploads the bootstrap log to S3 (lab-log-upload.timer), so that it stays readable when the boot
# hangs and the WaitCondition times out.
set -euo pipefail
# shellcheck source=/dev/null
source "${LAB_SETTINGS:?LAB_SETTINGS must name the bootstrap settings.env}"
# shellcheck source=/dev/null
source "$HOST_ENV_FILE"
exec timeout 120 "$AWS_HELPER" put "$LOG_FILE" "s3://$LAB_RESULTS_BUCKET/$LAB_STACK_NAME/$RESULTS_SUBDIR$LOG_OBJECT"
