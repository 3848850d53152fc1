import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderSettings, writeBootstrapFolder } from '../../../lib/aws/bootstrap/bootstrap.ts';
import type { LabConfig } from '../../../lib/config/schema.ts';
import { linkPython3 } from '../../host-python.ts';
import { tempDir } from '../../temp.ts';

/**
 * Runs the lab's shell programs for real, in a temporary folder, with fake system commands (aws,
 * curl, kubectl, k3s, nvidia-smi, shutdown, systemctl, dpkg-query, ...) first on the PATH. Each
 * fake appends its command line to calls.log; curl keeps every signal body it is asked to PUT.
 * The bootstrap runs from its own .sh files; only its settings.env moves the host paths into the
 * sandbox.
 */

/** shellcheck's findings for a bash script (empty when clean). */
export function shellcheck(script: string): string {
  const result = spawnSync('shellcheck', ['-s', 'bash', '-'], { input: script, encoding: 'utf8' });
  if (result.error) throw result.error;
  return result.status === 0 ? '' : `${result.stdout}${result.stderr}`;
}

/** shellcheck's findings for files (empty when clean), following `source` beside each file. */
export function shellcheckFiles(files: readonly string[]): string {
  const result = spawnSync('shellcheck', ['-s', 'bash', '-x', '-P', 'SCRIPTDIR', ...files], {
    encoding: 'utf8',
  });
  if (result.error) throw result.error;
  return result.status === 0 ? '' : `${result.stdout}${result.stderr}`;
}

/**
 * The longest a script may run before the sandbox ends it. Only a bound for a script that hangs:
 * the bootstrap's own step budgets end its waits first, and a run takes seconds of CPU but minutes
 * of wall time on a machine shared with others, so the bound is generous.
 */
const RUN_TIMEOUT_MS = 600_000;

/** This machine's PATH with the sandbox's fakes first and no folder holding `name` (a host without it). */
export function pathWithout(name: string, box: Sandbox): string {
  const dirs = (process.env.PATH ?? '').split(':').filter((dir) => dir && !existsSync(join(dir, name)));
  return [join(box.root, 'bin'), ...dirs].join(':');
}

/** Absolute host paths of the scripts, moved under the sandbox so that a run touches nothing else. */
const HOST_PATHS = [
  '/var/log/lab-bootstrap.log',
  '/opt/lab',
  '/var/lib/lab',
  '/usr/local/sbin',
  '/etc/systemd/system',
  '/usr/local/bin/helm',
  '/etc/apt',
  '/usr/share/keyrings',
  '/var/lib/dpkg',
  '/var/lib/apt',
  '/var/lib/rancher',
  '/etc/rancher',
  '/run/lab-aws',
];

export interface Signal {
  readonly url: string;
  readonly body: Record<string, unknown>;
  readonly raw: string;
}

export interface Sandbox {
  readonly root: string;
  /** The script with its host paths moved into the sandbox. */
  relocate(script: string): string;
  /** Host path as seen inside the sandbox. */
  path(hostPath: string): string;
  /** Puts a fake command at a host path (e.g. an already installed helm). */
  fake(hostPath: string, body: string): void;
  run(
    script: string,
    env?: Record<string, string>,
  ): { status: number | null; stdout: string; stderr: string };
  /**
   * Writes the bootstrap folder for the configuration (settings.env moved into the sandbox, with
   * `settings` replacing values by name) and runs its main.sh.
   */
  bootstrap(
    config: LabConfig,
    env?: Record<string, string>,
    settings?: Record<string, string>,
    render?: (config: LabConfig) => string,
  ): { status: number | null; stdout: string; stderr: string };
  /**
   * Writes the bootstrap folder (as `bootstrap` does) without running it. `render` makes the
   * settings.env (a network-lab cell's instead of the GPU host's).
   */
  writeBootstrap(
    config: LabConfig,
    settings?: Record<string, string>,
    render?: (config: LabConfig) => string,
  ): void;
  /** Runs a script file with the fakes first on the PATH. */
  runFile(
    file: string,
    env?: Record<string, string>,
  ): { status: number | null; stdout: string; stderr: string };
  /**
   * `runFile` without waiting for the script (its output is not kept): a run that waits on real
   * time (a step budget running out) goes on while the test process runs others. Settles with
   * its exit status when it ends.
   */
  runFileInBackground(file: string, env?: Record<string, string>): Promise<{ status: number | null }>;
  /** Where `bootstrap` put the folder. */
  readonly bootstrapDir: string;
  calls(): string[];
  /** The requests the fake S3 and Secrets Manager received, in order ("PUT bucket/key", "LIST bucket/prefix", ...). */
  awsRequests(): string[];
  /** The fake S3 object `bucket/key`, or undefined when nobody put it. */
  s3Object(bucketAndKey: string): string | undefined;
  /** Puts an object into the fake S3 (an earlier host's upload). */
  putS3Object(bucketAndKey: string, text: string): void;
  /**
   * Each config file lab-aws handed curl (-K): its mode and path. The mode is "?" in a run with
   * FAKE_CONFIG_MODES_UNREAD set (rehearse.ts's), so that a check of it fails there.
   */
  curlConfigFiles(): { mode: string; path: string }[];
  signals(): Signal[];
  /** For each `systemctl daemon-reload`, in order, the unit files systemd then knew. */
  systemdReloads(): string[][];
  log(): string;
}

/**
 * A fake command: appends its name and arguments to calls.log, then runs `body`. The name comes from
 * bash's own expansion, not \`basename\`: a bootstrap run calls fakes hundreds of times, and every
 * process costs (docs/testing.md, "Shell sandbox").
 */
export const fakeCommand = (body: string) =>
  `#!/bin/bash\necho "\${0##*/} $*" >>"$SANDBOX/calls.log"\n${body}\n`;
const FAKE = fakeCommand;

/**
 * `fakeCommand` for a POSIX sh `body`: /bin/sh (dash on Debian and Ubuntu) starts in about two
 * thirds of bash's CPU, and the fakes a bootstrap calls most (kubectl, k3s, systemctl) need no
 * bash. The line in calls.log is the same (printf, not dash's echo, which reads backslashes).
 */
export const shFakeCommand = (body: string) =>
  `#!/bin/sh\nprintf '%s\\n' "\${0##*/} $*" >>"$SANDBOX/calls.log"\n${body}\n`;
const SH = shFakeCommand;

/** The fake S3 and Secrets Manager endpoints the fake curl hands lab-aws's signed requests to. */
const FAKE_AWS_PY = fileURLToPath(new URL('./fake_aws.py', import.meta.url));

const FAKES: Record<string, string> = {
  shutdown: SH('exit 0'),
  // systemd knows a unit from the daemon-reload after its file was written: each reload notes the
  // units the folder then holds (a line in systemd-reloads; builtins only, no process).
  systemctl: SH(`
if [ "$1" = daemon-reload ]; then
  units=''
  for unit in "$SANDBOX"/host/etc/systemd/system/*; do if [ -e "$unit" ]; then units="$units \${unit##*/}"; fi; done
  printf '%s\\n' "\${units# }" >>"$SANDBOX/systemd-reloads"
fi
exit 0`),
  // The DLAMI's GPU packages, and one that is not.
  'dpkg-query': SH(
    `printf '%s\\n' 'ii  nvidia-driver-550' 'ii  libnvidia-compute-550' 'ii  cuda-toolkit-12-4' 'rc  nvidia-old-535' 'ii  openssl'`,
  ),
  'apt-mark': SH('exit 0'),
  // No apt process runs and nobody holds the dpkg locks.
  pgrep: SH('exit 1'),
  fuser: SH('exit 1'),
  'nvidia-container-runtime': SH('exit 0'),
  aws: FAKE(`
if [ -n "\${FAKE_AWS_FAIL:-}" ]; then echo "fatal error: An error occurred (AccessDenied) when calling the GetObject operation" >&2; exit 1; fi
# FAKE_AWS_RESTORE_FAIL: only downloads from the results bucket fail (a role without s3:GetObject).
if [ -n "\${FAKE_AWS_RESTORE_FAIL:-}" ] && [ "$1 $2" = "s3 sync" ] && [[ "$3" == s3://* ]]; then echo "fatal error: AccessDenied" >&2; exit 1; fi
# FAKE_AWS_FAIL_TIMES=N: the first N calls fail as S3 does right after boot now and then.
read -r tries 2>/dev/null <"$SANDBOX/aws-tries" || tries=0
echo $((tries + 1)) >"$SANDBOX/aws-tries"
if [ "$tries" -lt "\${FAKE_AWS_FAIL_TIMES:-0}" ]; then echo "fatal error: Could not connect to the endpoint URL" >&2; exit 1; fi
# FAKE_AWS_MISSING: a glob of command lines that fail as a missing object does (a report not yet written).
if [ -n "\${FAKE_AWS_MISSING:-}" ]; then case "$*" in $FAKE_AWS_MISSING) echo "fatal error: An error occurred (404) when calling the HeadObject operation: Not Found" >&2; exit 1 ;; esac; fi
# The K3s agent token in Secrets Manager; FAKE_SECRET_DENIED: the role may not read it.
if [ "$1 $2" = "secretsmanager get-secret-value" ]; then
  if [ -n "\${FAKE_SECRET_DENIED:-}" ]; then echo "An error occurred (AccessDeniedException) when calling the GetSecretValue operation" >&2; exit 254; fi
  echo "\${FAKE_AGENT_TOKEN:-fake-agent-token}"; exit 0
fi
args=("$@"); dst=\${args[-1]}
case "$dst" in
*bootstrap.zip) cp "$FAKE_BOOTSTRAP_ZIP" "$dst" ;;
# FAKE_MANIFESTS_ZIP: the manifests archive made once for a test file (else made here, a python3 start).
*.zip) if [ -n "\${FAKE_MANIFESTS_ZIP:-}" ]; then cp "$FAKE_MANIFESTS_ZIP" "$dst"; exit 0; fi; python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("00-namespace.yaml", "kind: Namespace\\n")
    z.writestr("jobs/run.yaml", "kind: Job\\n")' "$dst" ;;
esac
exit 0`),
  'nvidia-smi': SH(`
if [ "$1" = -L ]; then
  i=0
  while [ "$i" -lt "\${FAKE_GPUS:-0}" ]; do echo "GPU $i: NVIDIA L4 (UUID: GPU-host-$i)"; i=$((i + 1)); done
else
  echo "GPU0 X PHB"
fi`),
  // On an agent, \`k3s kubectl --kubeconfig <kubelet's> get node\` answers its Ready status (FAKE_AGENT_READY).
  // pip download in a container (the router wheelhouse): the wheels land in the folder bound at
  // /wheels; FAKE_PIP_FAIL makes pip fail as it does for a version without a matching wheel.
  k3s: SH(`
if [ "$1" = --version ]; then echo "k3s version v1.36.4+k3s1 (0123abcd)"; echo "go version go1.24"; fi
if [ "$1" = kubectl ]; then printf '%s' "\${FAKE_AGENT_READY-True}"; fi
case "$*" in
*"pip download"*)
  if [ -n "\${FAKE_PIP_FAIL:-}" ]; then
    for last; do :; done
    printf '%s\\n' "ERROR: No matching distribution found for $last" >&2; exit 1
  fi
  for a in "$@"; do
    case "$a" in
    type=bind,src=*,dst=/wheels,*) dir=\${a#type=bind,src=}; dir=\${dir%%,dst=*} ;;
    vllm-router==*) version=\${a#vllm-router==} ;;
    esac
  done
  : >"$dir/vllm_router-$version-cp38-abi3-manylinux_2_28_x86_64.whl"
  : >"$dir/fastapi-0.118.0-py3-none-any.whl" ;;
esac
exit 0`),
  // The agent's journal: FAKE_JOURNAL, one line per \n.
  journalctl: SH(`printf "%b\\n" "\${FAKE_JOURNAL:-}"`),
  kubectl: SH(`
# FAKE_HANG: a command line (glob) that does not return for 30 s, as a stuck rollout does; it notes
# "hang-over" in calls.log only if nothing ended it by then.
if [ -n "\${FAKE_HANG:-}" ]; then case "$*" in $FAKE_HANG) sleep 30; printf '%s\\n' "hang-over $*" >>"$SANDBOX/calls.log" ;; esac; fi
case "$*" in
# Every node that carries a host label, "host:Ready status:allocatable GPUs" a line (the server's
# wait lists its agents' nodes at once, 30-cluster.sh list_agent_nodes): the server, then FAKE_NODES.
*"get nodes -l llm-gateway-lab/host -o jsonpath="*"{.metadata.labels.llm-gateway-lab/host}:"*)
  printf 'server:True:%s\\n' "$FAKE_ALLOCATABLE"
  set -f
  for node in \${FAKE_NODES:-}; do value=\${node#*=}; printf '%s:%s:%s\\n' "\${node%%=*}" "\${value%%:*}" "\${value#*:}"; done ;;
# Nodes by their host label: the server (Ready, FAKE_ALLOCATABLE GPUs) and the agents of
# FAKE_NODES ("gpu-1=True:1 client-1=True:0"); an agent not listed has not joined.
*"get nodes -l llm-gateway-lab/host="*)
  line="$*"; host=\${line#*llm-gateway-lab/host=}; host=\${host%% *}
  if [ "$host" = server ]; then ready=True gpus=$FAKE_ALLOCATABLE
  else
    entry=''
    set -f
    for node in \${FAKE_NODES:-}; do case "$node" in "$host="*) entry=$node; break ;; esac; done
    [ -n "$entry" ] || exit 0
    value=\${entry#*=}; ready=\${value%%:*}; gpus=\${value#*:}
  fi
  case "$*" in
  *conditions*allocatable*) echo "$ready $gpus" ;;
  *conditions*) echo "$ready" ;;
  *allocatable*) printf '%s' "$gpus" ;;
  esac ;;
"get -f "*envoy-gateway*) echo '{"kind":"List","items":[{"kind":"Deployment","metadata":{"namespace":"envoy-gateway-system","name":"envoy-gateway"}}]}' ;;
"get -f "*) echo '{"kind":"List","items":[]}' ;;
*"get nodes"*) printf '%s' "$FAKE_ALLOCATABLE" ;;
*podIP*) printf '10.42.0.9' ;;
*" exec "*)
  pod=$4
  if [ -n "\${FAKE_SHARED_GPU:-}" ]; then uuid=GPU-shared; else uuid="GPU-$pod"; fi
  echo "GPU 0: NVIDIA L4 (UUID: $uuid)" ;;
esac
exit 0`),
  curl: FAKE(`
# curl 8.5 (Ubuntu 24.04) lists --aws-sigv4; FAKE_OLD_CURL: one from before 7.75 does not.
case "$1" in
--help) [ -n "\${FAKE_OLD_CURL:-}" ] || echo "     --aws-sigv4 <provider1[:prov2[:reg[:srv]]]> AWS V4 signature auth"; echo " -o, --output <file>"; exit 0 ;;
--version) echo "curl \${FAKE_OLD_CURL:-8.5.0} (x86_64-pc-linux-gnu)"; exit 0 ;;
esac
# copy <file> <to>: cp, done by bash for a file without a NUL byte (read -d '' stops at the first
# one and then succeeds): the objects, signals and installers are text, and cp is a process each.
copy() {
  local text
  if [ -f "$1" ] && ! IFS= read -r -d '' text <"$1"; then printf '%s' "$text" >"$2"; else cp "$1" "$2"; fi
}
out='' body='' data='' url='' headers='' fail='' sigv4='' cfg='' method='' wfmt=''
while [ $# -gt 0 ]; do
  case "$1" in
  -o) out=$2; shift ;;
  # curl reads further options from stdin (the launcher's S3 keys) or a file (lab-aws's): never
  # the command line. The file's mode and path are kept, to check it is private and removed.
  -K)
    # FAKE_CONFIG_MODES_UNREAD: a run whose tests do not read the modes (a stat process each) notes "?".
    if [ "$2" = - ]; then read -r -d '' cfg || true; else
      read -r -d '' cfg <"$2" || true
      if [ -n "\${FAKE_CONFIG_MODES_UNREAD:-}" ]; then mode='?'; else mode=$(stat -c %a "$2"); fi
      echo "$mode $2" >>"$SANDBOX/curl-config-files"
    fi
    shift ;;
  --aws-sigv4) sigv4=$2; shift ;;
  --data-binary) data=$2; body=\${2#@}; shift ;;
  -H) headers+="$2;"; shift ;;
  -X) method=$2; shift ;;
  -w) wfmt=$2; shift ;;
  --retry | --max-time) shift ;;
  --fail | -fsS | -fsSL) fail=1 ;;
  -*) ;;
  *) url=$1 ;;
  esac
  shift
done
# lab-aws's signed calls (they ask for the status): S3 and Secrets Manager as fake_aws.py answers them.
case "$url" in
https://*.s3.*.amazonaws.com/* | https://secretsmanager.*.amazonaws.com/)
  if [ -n "$wfmt" ]; then
    [ -n "$method" ] || if [ -n "$data" ]; then method=POST; else method=GET; fi
    # A plain PutObject or GetObject is answered here, as fake_aws.py would (python starts slowly
    # on a loaded machine); a listing, Secrets Manager and the forced answers go to fake_aws.py.
    if [[ "$url" == https://*.s3.*.amazonaws.com/* && "$url" != *'?'* && ( "$method" = PUT || "$method" = GET ) &&
      -z "\${FAKE_AWS_ANSWERS:-}\${FAKE_S3_PUT_DENIED:-}" ]]; then
      host=\${url#https://}; bucket=\${host%%.s3.*}; region=\${host#*.s3.}; region=\${region%%.amazonaws.com*}
      key=\${host#*/}; printf -v key '%b' "\${key//%/\\\\x}"; object="$SANDBOX/s3/$bucket/$key"
      echo "$method $bucket/$key" >>"$SANDBOX/aws-requests.log"
      if [ "$sigv4" != "aws:amz:$region:s3" ] || [[ "$cfg" != *'user = "ASIAFAKEKEYID:fake/secret+key-never-logged"'* ]] ||
        [[ "$cfg" != *'x-amz-security-token: fake-session-token-never-logged'* ]]; then
        echo '<Error><Code>AccessDenied</Code><Message>unsigned or signed with other keys</Message></Error>' >"$out"; printf 403; exit 0
      fi
      if [ "$method" = PUT ]; then
        sha=$(sha256sum "\${data#@}"); sha=\${sha%% *}
        if [[ "$headers" != *"x-amz-content-sha256: $sha;"* ]]; then
          echo '<Error><Code>XAmzContentSHA256Mismatch</Code><Message>mismatch</Message></Error>' >"$out"; printf 400; exit 0
        fi
        [ -d "\${object%/*}" ] || mkdir -p "\${object%/*}"; copy "\${data#@}" "$object"; : >"$out"; printf 200; exit 0
      fi
      if [ -f "$object" ]; then copy "$object" "$out"; printf 200; exit 0; fi
      echo '<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>' >"$out"; printf 404; exit 0
    fi
    # A first page of a listing that holds no key (a first boot's restore), and a signed listing
    # refused (FAKE_S3_LIST_DENIED), are answered here too, as fake_aws.py answers them; a listing
    # with keys or pages, an unsigned one or a forced answer goes to fake_aws.py.
    if [[ "$url" == https://*.s3.*.amazonaws.com/'?list-type=2&prefix='* && "$method" = GET &&
      -z "\${FAKE_AWS_ANSWERS:-}" && ( -n "\${FAKE_S3_LIST_DENIED:-}" || -z "\${FAKE_S3_PAGE:-}" ) ]]; then
      host=\${url#https://}; bucket=\${host%%.s3.*}; region=\${host#*.s3.}; region=\${region%%.amazonaws.com*}
      prefix=\${url#*'?list-type=2&prefix='}; printf -v prefix '%b' "\${prefix//%/\\\\x}"
      if [[ "$prefix" != *['&+']* && "$sigv4" = "aws:amz:$region:s3" &&
        "$cfg" == *'user = "ASIAFAKEKEYID:fake/secret+key-never-logged"'* && "$cfg" == *'x-amz-security-token: fake-session-token-never-logged'* ]]; then
        if [ -n "\${FAKE_S3_LIST_DENIED:-}" ]; then
          echo "LIST $bucket/$prefix" >>"$SANDBOX/aws-requests.log"
          printf '%s' '<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>' >"$out"
          printf 403; exit 0
        fi
        shopt -s nullglob dotglob; held=("$SANDBOX/s3/$bucket/$prefix"*)
      else
        held=(unanswered)
      fi
      if [[ \${#held[@]} -eq 0 ]]; then
        echo "LIST $bucket/$prefix" >>"$SANDBOX/aws-requests.log"
        printf '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>%s</Name><Prefix>%s</Prefix><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated></ListBucketResult>' "$bucket" "$prefix" >"$out"
        printf 200; exit 0
      fi
    fi
    # A signed GetSecretValue of the agent token, as fake_aws.py answers it (json.dumps's spacing);
    # a refusal, a forced answer or any other request goes to fake_aws.py.
    secret_request='^\\{"SecretId":"([A-Za-z0-9:/_+=.@-]+)"\\}$' plain_token='^[A-Za-z0-9._+=/:-]+$'
    if [[ "$url" == https://secretsmanager.*.amazonaws.com/ && "$method" = POST &&
      -z "\${FAKE_AWS_ANSWERS:-}\${FAKE_SECRET_DENIED:-}" &&
      "$headers" == *'X-Amz-Target: secretsmanager.GetSecretValue;'* && "$headers" == *'Content-Type: application/x-amz-json-1.1;'* &&
      "$data" =~ $secret_request ]]; then
      id=\${BASH_REMATCH[1]} token=\${FAKE_AGENT_TOKEN:-fake-agent-token}
      region=\${url#https://secretsmanager.}; region=\${region%%.amazonaws.com/}
      if [[ "$token" =~ $plain_token && "$sigv4" = "aws:amz:$region:secretsmanager" &&
        "$cfg" == *'user = "ASIAFAKEKEYID:fake/secret+key-never-logged"'* && "$cfg" == *'x-amz-security-token: fake-session-token-never-logged'* ]]; then
        echo "POST secretsmanager secretsmanager.GetSecretValue" >>"$SANDBOX/aws-requests.log"
        printf '{"ARN": "%s", "Name": "ClusterAgentToken", "SecretString": "%s", "VersionStages": ["AWSCURRENT"]}' "$id" "$token" >"$out"
        printf 200; exit 0
      fi
    fi
    # -S: no site module (fake_aws.py needs the standard library only): about 15 ms less per start.
    printf '%s' "$cfg" | python3 -S "$FAKE_AWS_PY" "$method" "$url" "$out" "$data" "$headers" "$sigv4"
    exit $?
  fi ;;
esac
if [ -n "$body" ]; then
  # FAKE_SIGNAL_403=N: the first N PUTs are refused as an expired presigned URL is (HTTP 403);
  # without --fail curl still exits 0 on it.
  read -r tries 2>/dev/null <"$SANDBOX/signal-tries" || tries=0
  echo $((tries + 1)) >"$SANDBOX/signal-tries"
  if [ "$tries" -lt "\${FAKE_SIGNAL_403:-0}" ]; then
    echo "<Error><Code>AccessDenied</Code></Error>"
    if [ -n "$fail" ]; then echo "curl: (22) The requested URL returned error: 403" >&2; exit 22; fi
    exit 0
  fi
  signals=("$SANDBOX"/signal-*.json); [ -e "\${signals[0]}" ] || signals=(); n=\${#signals[@]}
  copy "$body" "$SANDBOX/signal-$n.json"
  printf '%s' "$url" >"$SANDBOX/signal-$n.url"
  exit 0
fi
# The metadata service as IMDSv2 answers: a token for a PUT with a TTL, data only with the token.
imds_token='imds-token-for-the-test'
case "$url" in
http://169.254.169.254/latest/api/token)
  if [ -n "\${FAKE_NO_IMDS:-}" ]; then exit 7; fi
  [[ "$headers" == *"X-aws-ec2-metadata-token-ttl-seconds: "* ]] || exit 22
  printf '%s' "$imds_token" ;;
http://169.254.169.254/latest/meta-data/*)
  [[ "$headers" == *"X-aws-ec2-metadata-token: $imds_token;"* ]] || exit 22
  case "$url" in
  */instance-type) printf 'g6.12xlarge' ;;
  */instance-id) printf '%s' "\${FAKE_INSTANCE_ID:-i-0server0000000000}" ;;
  */local-ipv4) printf '10.0.1.23' ;;
  */placement/availability-zone) printf 'us-west-2b' ;;
  */iam/security-credentials/) printf 'LabHostRole' ;;
  */iam/security-credentials/LabHostRole)
    printf '{"Code":"Success","Type":"AWS-HMAC","AccessKeyId":"ASIAFAKEKEYID","SecretAccessKey":"fake/secret+key-never-logged","Token":"fake-session-token-never-logged","Expiration":"2030-01-01T00:00:00Z"}' ;;
  *) exit 22 ;;
  esac ;;
# S3 GetObject, virtual-hosted style: answered only when signed (SigV4 for s3, the role's keys and
# session token from stdin). FAKE_S3_FAIL: refused; FAKE_S3_FAIL_TIMES=N: the first N fail.
https://*.s3.*.amazonaws.com/*)
  if [ -z "$sigv4" ] || [[ "$cfg" != *'user = "ASIAFAKEKEYID:fake/secret+key-never-logged"'* ]] ||
    [[ "$cfg" != *'x-amz-security-token: fake-session-token-never-logged'* ]]; then
    echo "curl: (22) The requested URL returned error: 403 (unsigned)" >&2; exit 22
  fi
  if [ -n "\${FAKE_S3_FAIL:-}" ]; then echo "curl: (22) The requested URL returned error: 403 AccessDenied" >&2; exit 22; fi
  read -r tries 2>/dev/null <"$SANDBOX/s3-tries" || tries=0
  echo $((tries + 1)) >"$SANDBOX/s3-tries"
  if [ "$tries" -lt "\${FAKE_S3_FAIL_TIMES:-0}" ]; then echo "curl: (28) Connection timed out" >&2; exit 28; fi
  case "$out" in
  *bootstrap.zip) cp "$FAKE_BOOTSTRAP_ZIP" "$out" ;;
  *.zip) if [ -n "\${FAKE_MANIFESTS_ZIP:-}" ]; then cp "$FAKE_MANIFESTS_ZIP" "$out"; exit 0; fi; python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("00-namespace.yaml", "kind: Namespace\\n")
    z.writestr("jobs/run.yaml", "kind: Job\\n")' "$out" ;;
  esac ;;
https://get.k3s.io) copy "$SANDBOX/k3s-install.sh" "$out" ;;
# The K3s server's port, as an agent probes it; FAKE_SERVER_GONE: nothing answers (connection refused).
https://*:6443/ping) if [ -n "\${FAKE_SERVER_GONE:-}" ]; then echo "curl: (7) Failed to connect" >&2; exit 7; fi ;;
*/v1/models) echo '{"object":"list","data":[{"id":"'"$FAKE_SERVED"'"}]}' ;;
*) if [ -n "$out" ]; then echo "# from $url" >"$out"; fi ;;
esac`),
};

export function makeSandbox(): Sandbox {
  const root = tempDir('lab-bootstrap-');
  const bin = join(root, 'bin');
  mkdirSync(bin);
  for (const [name, text] of Object.entries(FAKES)) {
    writeFileSync(join(bin, name), text);
    chmodSync(join(bin, name), 0o755);
  }
  linkPython3(bin);
  const path = (hostPath: string) => join(root, 'host', hostPath);
  for (const dir of [
    '/var/log',
    '/etc/systemd/system',
    '/usr/local/sbin',
    '/usr/local/bin',
    '/opt/lab',
    '/etc/apt/apt.conf.d',
    '/etc/apt/sources.list.d',
    '/usr/share/keyrings',
  ]) {
    mkdirSync(path(dir), { recursive: true });
  }
  // The K3s installer: writes the containerd config K3s generates, with the nvidia runtime it
  // finds (k3s-io/k3s pkg/agent/containerd/nvidia.go), unless FAKE_NO_NVIDIA_RUNTIME is set.
  const containerdConfig = path('/var/lib/rancher/k3s/agent/etc/containerd/config.toml');
  const kubeletKubeconfig = path('/var/lib/rancher/k3s/agent/kubelet.kubeconfig');
  writeFileSync(
    join(root, 'k3s-install.sh'),
    [
      '#!/bin/sh',
      'echo "k3s-install $INSTALL_K3S_VERSION|$INSTALL_K3S_EXEC" >>"$SANDBOX/calls.log"',
      // An agent (K3S_URL): what get.k3s.io would be given; once the server accepted the token,
      // K3s writes the kubelet's kubeconfig (FAKE_JOIN_FAIL: it never does).
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion, not a template
      'if [ -n "${K3S_URL:-}" ]; then',
      '  echo "k3s-install-agent $K3S_URL|token=$K3S_TOKEN|skip-start=$INSTALL_K3S_SKIP_START" >>"$SANDBOX/calls.log"',
      `  if [ -z "\${FAKE_JOIN_FAIL:-}" ]; then mkdir -p '${join(kubeletKubeconfig, '..')}'; touch '${kubeletKubeconfig}'; fi`,
      'fi',
      `mkdir -p '${join(containerdConfig, '..')}'`,
      `printf '%s\\n' 'version = 3' "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]" > '${containerdConfig}'`,
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion, not a template
      'if [ -z "${FAKE_NO_NVIDIA_RUNTIME:-}" ]; then',
      `  printf '%s\\n' "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.'nvidia']" "  runtime_type = 'io.containerd.runc.v2'" "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.'nvidia'.options]" '  BinaryName = "/usr/bin/nvidia-container-runtime"' >> '${containerdConfig}'`,
      'fi',
      '',
    ].join('\n'),
  );
  const bootstrapDir = join(root, 'bootstrap');
  return {
    root,
    path,
    fake(hostPath, body) {
      writeFileSync(path(hostPath), FAKE(body));
      chmodSync(path(hostPath), 0o755);
    },
    relocate: (script) => HOST_PATHS.reduce((text, p) => text.replaceAll(p, path(p)), script),
    bootstrapDir,
    writeBootstrap(config, settings = {}, render = renderSettings) {
      let text = this.relocate(render(config));
      for (const [name, value] of Object.entries(settings)) {
        const line = new RegExp(`^${name}=.*$`, 'm');
        if (!line.test(text)) throw new Error(`settings.env has no ${name}`);
        text = text.replace(line, `${name}=${value}`);
      }
      writeBootstrapFolder(config, bootstrapDir, text);
    },
    bootstrap(config, env = {}, settings = {}, render = renderSettings) {
      this.writeBootstrap(config, settings, render);
      return this.runFile(join(bootstrapDir, 'main.sh'), env);
    },
    runFile(file, env = {}) {
      const result = spawnSync('bash', [file], {
        encoding: 'utf8',
        timeout: RUN_TIMEOUT_MS,
        env: { PATH: `${bin}:${process.env.PATH}`, HOME: root, SANDBOX: root, FAKE_AWS_PY, ...env },
      });
      return { status: result.status, stdout: result.stdout, stderr: result.stderr };
    },
    runFileInBackground(file, env = {}) {
      return new Promise((resolve, reject) => {
        const child = spawn('bash', [file], {
          // Ignored, not piped: a pipe nobody reads while the test process runs a spawnSync of
          // its own would fill and stop the script.
          stdio: 'ignore',
          timeout: RUN_TIMEOUT_MS,
          env: { PATH: `${bin}:${process.env.PATH}`, HOME: root, SANDBOX: root, FAKE_AWS_PY, ...env },
        });
        child.on('error', reject);
        child.on('close', (status) => resolve({ status }));
      });
    },
    run(script, env = {}) {
      const file = join(root, `script-${readdirSync(root).length}.sh`);
      writeFileSync(file, this.relocate(script));
      const result = spawnSync('bash', [file], {
        encoding: 'utf8',
        timeout: RUN_TIMEOUT_MS,
        env: { PATH: `${bin}:${process.env.PATH}`, HOME: root, SANDBOX: root, FAKE_AWS_PY, ...env },
      });
      return { status: result.status, stdout: result.stdout, stderr: result.stderr };
    },
    calls: () => {
      const file = join(root, 'calls.log');
      return existsSync(file) ? readFileSync(file, 'utf8').trimEnd().split('\n') : [];
    },
    awsRequests: () => {
      const file = join(root, 'aws-requests.log');
      return existsSync(file) ? readFileSync(file, 'utf8').trimEnd().split('\n') : [];
    },
    s3Object: (bucketAndKey) => {
      const file = join(root, 's3', bucketAndKey);
      return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
    },
    putS3Object: (bucketAndKey, text) => {
      const file = join(root, 's3', bucketAndKey);
      mkdirSync(join(file, '..'), { recursive: true });
      writeFileSync(file, text);
    },
    curlConfigFiles: () => {
      const file = join(root, 'curl-config-files');
      if (!existsSync(file)) return [];
      return readFileSync(file, 'utf8')
        .trimEnd()
        .split('\n')
        .map((line) => ({ mode: line.slice(0, line.indexOf(' ')), path: line.slice(line.indexOf(' ') + 1) }));
    },
    signals: () =>
      readdirSync(root)
        .filter((f) => /^signal-\d+\.json$/.test(f))
        .sort()
        .map((f) => {
          const raw = readFileSync(join(root, f), 'utf8');
          return {
            raw,
            body: JSON.parse(raw),
            url: readFileSync(join(root, f.replace('.json', '.url')), 'utf8'),
          };
        }),
    systemdReloads: () => {
      const file = join(root, 'systemd-reloads');
      if (!existsSync(file)) return [];
      return readFileSync(file, 'utf8')
        .trimEnd()
        .split('\n')
        .map((line) => (line === '' ? [] : line.split(' ')));
    },
    log: () => {
      const file = path('/var/log/lab-bootstrap.log');
      return existsSync(file) ? readFileSync(file, 'utf8') : '';
    },
  };
}
