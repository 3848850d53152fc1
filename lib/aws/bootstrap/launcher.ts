import {
  BOOTSTRAP_DIR_ON_HOST,
  BOOTSTRAP_LOG,
  JSON_STRING_FUNCTION,
  MANIFESTS_DIR,
  SIGNAL_UNIQUE_ID,
  SIGNALLED_MARKER,
  signalCommand,
  WORK_DIR,
} from './shell.ts';

/**
 * What the user-data launcher needs. At synth time these are CDK tokens (`${Token[...]}`), so the
 * launcher only places them, never inspects them.
 */
export interface LauncherInputs {
  /** Region of the stack, for the AWS CLI. */
  readonly region: string;
  /** `s3://bucket/key.zip` of the bootstrap folder (a directory asset: main.sh, settings.env, ...). */
  readonly bootstrapS3Uri: string;
  /**
   * `s3://bucket/key.zip` of the manifests folder (a directory asset is a zip), or an `s3://` prefix
   * holding the folder's files.
   */
  readonly manifestsS3Uri: string;
  /** The WaitConditionHandle's presigned URL. */
  readonly waitHandleUrl: string;
  /** Results bucket name; results go under `<stackName>/`. */
  readonly resultsBucket: string;
  readonly stackName: string;
  /**
   * Further deploy-time inputs of one kind of host, exported by name (a K3s agent's server URL,
   * the agent token's secret ARN): values only the deployment knows, so not in settings.env.
   */
  readonly environment?: Readonly<Record<string, string>>;
}

/** The size EC2 allows for user data (before base64). */
export const USER_DATA_LIMIT_BYTES = 16 * 1024;

/**
 * The EC2 user data: a small bash launcher that downloads the bootstrap script and the manifests
 * from S3 and runs the bootstrap with its inputs as environment variables. The bulk lives in the
 * bootstrap (an S3 asset) because user data is limited to 16 KB.
 *
 * Each input is placed in a single-quoted bash assignment. CloudFormation's values here (region,
 * S3 URIs, a presigned HTTPS URL, a bucket and a stack name) never contain a single quote; a
 * concrete value that does is refused. Tokens pass unchanged.
 */
export function renderLauncher(inputs: LauncherInputs): string {
  const { environment = {}, ...fixed } = inputs;
  for (const [name, value] of Object.entries({ ...fixed, ...environment })) {
    if (value.includes("'"))
      throw new Error(`renderLauncher: ${name} must not contain a single quote: ${value}`);
  }
  for (const name of Object.keys(environment)) {
    if (!/^LAB_[A-Z0-9_]+$/.test(name))
      throw new Error(`renderLauncher: environment name ${name} must look like LAB_SOMETHING`);
  }
  const extra = Object.entries(environment).map(([name, value]) => `export ${name}='${value}'\n`);
  return `#!/bin/bash
# Lab launcher (user data): fetch the bootstrap folder and the manifests from S3 and run the
# bootstrap, which signals the WaitCondition. A failure before any signal is signalled here, so the
# stack rolls back at once. WAIT_HANDLE_URL is presigned (how a WaitCondition is signalled): never log it.
set -euo pipefail
exec >>${BOOTSTRAP_LOG} 2>&1
export LAB_REGION='${inputs.region}'
export LAB_RESULTS_BUCKET='${inputs.resultsBucket}'
export LAB_STACK_NAME='${inputs.stackName}'
export WAIT_HANDLE_URL='${inputs.waitHandleUrl}'
${extra.join('')}export AWS_DEFAULT_REGION=$LAB_REGION LAB_MANIFESTS_DIR=${MANIFESTS_DIR}
bootstrap_uri='${inputs.bootstrapS3Uri}'
manifests_uri='${inputs.manifestsS3Uri}'
step=start
${JSON_STRING_FUNCTION}
on_exit() {
  local rc=$? reason
  set +e
  if [ "$rc" -eq 0 ] || [ -e ${SIGNALLED_MARKER} ]; then exit "$rc"; fi
  echo "launcher: $step failed (exit $rc)"
  reason=$(tail -n 20 ${BOOTSTRAP_LOG} | tail -c 1400 | json_string)
  printf '{"Status":"FAILURE","Reason":%s,"UniqueId":"${SIGNAL_UNIQUE_ID}","Data":"launcher: %s"}' "$reason" "$step" >launcher-signal.json
  ${signalCommand('launcher-signal.json')} >/dev/null || echo "launcher: no signal sent"
  exit "$rc"
}
trap on_exit EXIT
# S3 right after boot can answer slowly or not at all: a few tries, further apart each time.
fetch() {
  local attempt
  for attempt in 1 2 3 4 5; do
    if aws s3 cp --only-show-errors "$@"; then return 0; fi
    echo "launcher: aws s3 cp failed (attempt $attempt of 5)"
    if [ "$attempt" -lt 5 ]; then sleep $((attempt * 5)); fi
  done
  return 1
}
mkdir -p ${MANIFESTS_DIR} ${BOOTSTRAP_DIR_ON_HOST}
cd ${WORK_DIR}
step="download the bootstrap"
fetch "$bootstrap_uri" bootstrap.zip
python3 -m zipfile -e bootstrap.zip ${BOOTSTRAP_DIR_ON_HOST}
step="download the manifests"
case "$manifests_uri" in
*.zip) fetch "$manifests_uri" manifests.zip; python3 -m zipfile -e manifests.zip ${MANIFESTS_DIR} ;;
*) fetch --recursive "$manifests_uri" ${MANIFESTS_DIR} ;;
esac
step="run the bootstrap"
bash ${BOOTSTRAP_DIR_ON_HOST}/main.sh
`;
}
