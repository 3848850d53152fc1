import {
  BOOTSTRAP_DIR_ON_HOST,
  BOOTSTRAP_LOG,
  DEADLINE_FILE,
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
  /** Region of the stack: the S3 endpoint and the signature's scope. */
  readonly region: string;
  /**
   * The host's lifetime in minutes: the deadline the launcher arms before anything else (a plain
   * `shutdown -h +N`, which terminates the instance: its template's shutdown behaviour), so that
   * a host whose launcher or bootstrap dies early still ends. The bootstrap's cost guard replaces
   * it with the persistent timer (01-cost-guard.sh).
   */
  readonly lifetimeMinutes: number;
  /** `s3://bucket/key.zip` of the bootstrap folder (a directory asset: main.sh, settings.env, ...). */
  readonly bootstrapS3Uri: string;
  /** `s3://bucket/key.zip` of the manifests folder (a directory asset is a zip). */
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
 * The EC2 user data: a small bash launcher that arms the host's deadline, downloads the bootstrap
 * folder and the manifests from S3 and runs the bootstrap with its inputs as environment
 * variables. The bulk lives in the bootstrap (an S3 asset) because user data is limited to 16 KB.
 *
 * It needs only bash, curl 7.86.0 or later, python3 (to unzip) and shutdown: no AWS CLI, which
 * Canonical's Ubuntu images do not have. The S3 requests are signed by curl (`--aws-sigv4`) with
 * the instance role's credentials, read from the metadata service with an IMDSv2 session token;
 * curl reads the keys from its standard input (`-K -`), never from its command line. An older curl
 * does not sign the session token header S3 requires (docs/facts.md §2.5): the image's AWS CLI
 * downloads instead (the Ubuntu 22.04 Deep Learning AMI has curl 7.81.0 and the CLI), and with
 * neither the FAILURE signal names the curl found.
 *
 * Each input is placed in a single-quoted bash assignment. CloudFormation's values here (region,
 * S3 URIs, a presigned HTTPS URL, a bucket and a stack name) never contain a single quote; a
 * concrete value that does is refused. Tokens pass unchanged.
 */
export function renderLauncher(inputs: LauncherInputs): string {
  const { environment = {}, lifetimeMinutes, ...fixed } = inputs;
  for (const [name, value] of Object.entries({ ...fixed, ...environment })) {
    if (value.includes("'"))
      throw new Error(`renderLauncher: ${name} must not contain a single quote: ${value}`);
  }
  for (const name of Object.keys(environment)) {
    if (!/^LAB_[A-Z0-9_]+$/.test(name))
      throw new Error(`renderLauncher: environment name ${name} must look like LAB_SOMETHING`);
  }
  if (!Number.isInteger(lifetimeMinutes) || lifetimeMinutes < 1) {
    throw new Error(
      `renderLauncher: lifetimeMinutes must be a whole number of at least 1, got ${lifetimeMinutes}`,
    );
  }
  const extra = Object.entries(environment).map(([name, value]) => `export ${name}='${value}'\n`);
  return `#!/bin/bash
# Lab launcher (user data). First the deadline: whatever fails later, the host shuts down (and so
# terminates) after ${lifetimeMinutes} minutes; the bootstrap replaces this with its persistent timer.
mkdir -p ${WORK_DIR}
[ -s ${DEADLINE_FILE} ] || date -u -d '+${lifetimeMinutes} minutes' +%Y-%m-%dT%H:%M:%SZ >${DEADLINE_FILE}
shutdown -h +${lifetimeMinutes} 'lab lifetime reached before the bootstrap armed its cost guard'
# Then fetch the bootstrap folder and the manifests from S3 and run the bootstrap, which signals
# the WaitCondition. A failure before any signal is signalled here, so the stack rolls back at once.
# WAIT_HANDLE_URL is presigned (how a WaitCondition is signalled): never log it.
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
${S3_GET_FUNCTIONS}
mkdir -p ${MANIFESTS_DIR} ${BOOTSTRAP_DIR_ON_HOST}
cd ${WORK_DIR}
step="check curl"
s3_copy=s3_get
cv=$(curl --version) || cv=
cv=\${cv%%$'\\n'*}
if ! [[ $cv =~ ^curl\\ ([0-9]+)\\.([0-9]+) ]] || ((BASH_REMATCH[1] * 1000 + BASH_REMATCH[2] < 7086)); then
  command -v aws >/dev/null || { echo "launcher: this curl ($cv) cannot sign S3 requests (--aws-sigv4 signs the session token header from curl 7.86.0 on) and there is no AWS CLI"; exit 1; }
  s3_copy=aws_get
fi
step="download the bootstrap"
fetch "$bootstrap_uri" bootstrap.zip
python3 -m zipfile -e bootstrap.zip ${BOOTSTRAP_DIR_ON_HOST}
step="download the manifests"
fetch "$manifests_uri" manifests.zip
python3 -m zipfile -e manifests.zip ${MANIFESTS_DIR}
step="run the bootstrap"
bash ${BOOTSTRAP_DIR_ON_HOST}/main.sh
`;
}

/**
 * \`fetch s3://bucket/key file\`: an S3 GetObject signed by curl (Signature Version 4, service
 * s3) with the instance role's temporary credentials from IMDSv2 (a PUT for a session token,
 * then the role's name and its keys; the session token goes in x-amz-security-token). The object
 * is addressed virtual-hosted style (bucket.s3.region.amazonaws.com); the payload hash is the
 * SHA-256 of the empty body, which every curl from 7.86.0 signs as S3 checks it (docs/facts.md
 * §2.5). S3 right after boot can answer slowly or not at all: a few tries, further apart each
 * time, each with fresh credentials (one session token per try).
 *
 * The keys reach curl's config (`-K -`) as they are, read by bash's own regex (no python3 start
 * per download): a key with a quote, a backslash, a blank or a control character would need
 * escaping there (docs/facts.md §2.5, the config file's quoting) and is refused, as lab-aws
 * refuses it on the same host later. The metadata service's keys are base64-like.
 */
const S3_GET_FUNCTIONS = `imds() { curl -sS --fail --max-time 5 -H "X-aws-ec2-metadata-token: $t" "http://169.254.169.254/latest/meta-data/$1"; }
s3_get() {
  local path=\${1#s3://} t role keys f p k=()
  if ! t=$(curl -sS --fail --max-time 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' http://169.254.169.254/latest/api/token) ||
    ! role=$(imds iam/security-credentials/); then echo "launcher: no instance role credentials from the metadata service"; return 1; fi
  keys=$(imds "iam/security-credentials/\${role%%$'\\n'*}") || return 1
  for f in AccessKeyId SecretAccessKey Token; do
    p="\\"$f\\"[[:space:]]*:[[:space:]]*\\"([^\\"\\\\[:space:][:cntrl:]]+)\\""
    [[ $keys =~ $p ]] || { echo "launcher: no $f of the expected form in the role's keys"; return 1; }
    k+=("\${BASH_REMATCH[1]}")
  done
  printf 'user = "%s:%s"\\nheader = "x-amz-security-token: %s"\\n' "\${k[@]}" |
    curl -sS --fail --max-time 300 -K - --aws-sigv4 "aws:amz:$LAB_REGION:s3" \\
      -H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' -o "$2" "https://\${path%%/*}.s3.$LAB_REGION.amazonaws.com/\${path#*/}"
}
aws_get() { aws s3 cp --only-show-errors --region "$LAB_REGION" "$1" "$2"; }
fetch() {
  local attempt
  for attempt in 1 2 3 4 5; do
    if "$s3_copy" "$@"; then return 0; fi
    echo "launcher: S3 GET of $1 failed (attempt $attempt of 5)"
    if [ "$attempt" -lt 5 ]; then sleep $((attempt * 5)); fi
  done
  return 1
}`;
