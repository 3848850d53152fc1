#!/bin/bash
# Uploads the lab results to S3: run by lab-results-sync.timer, at shutdown, before the deadline,
# and by `lab results`. A PutObject per new or changed file (lab-aws sync-up). LAB_SETTINGS names
# the bootstrap's settings.env (install_program sets it).
set -euo pipefail
# shellcheck source=/dev/null
source "${LAB_SETTINGS:?LAB_SETTINGS must name the bootstrap settings.env}"
# shellcheck source=/dev/null
source "$HOST_ENV_FILE"
exec "$AWS_HELPER" sync-up "$RESULTS_DIR/" "s3://$LAB_RESULTS_BUCKET/$LAB_STACK_NAME/$RESULTS_SUBDIR"
