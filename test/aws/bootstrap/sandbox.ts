import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../../temp.ts';

/**
 * Runs the rendered scripts for real, in a temporary folder, with fake system commands (aws, curl,
 * kubectl, k3s, nvidia-smi, shutdown, systemctl, ...) first on the PATH. Each fake appends its
 * command line to calls.log; curl keeps every signal body it is asked to PUT.
 */

export const shellcheckAvailable = spawnSync('shellcheck', ['--version']).status === 0;

/** shellcheck's findings for a bash script (empty when clean). */
export function shellcheck(script: string): string {
  const result = spawnSync('shellcheck', ['-s', 'bash', '-'], { input: script, encoding: 'utf8' });
  if (result.error) throw result.error;
  return result.status === 0 ? '' : `${result.stdout}${result.stderr}`;
}

/** Absolute host paths of the scripts, moved under the sandbox so that a run touches nothing else. */
const HOST_PATHS = [
  '/var/log/lab-bootstrap.log',
  '/opt/lab',
  '/var/lib/lab',
  '/usr/local/sbin/lab-sync-results',
  '/usr/local/sbin/lab-terminate-when-done',
  '/etc/systemd/system',
  '/usr/local/bin/helm',
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
  calls(): string[];
  signals(): Signal[];
  log(): string;
}

const FAKE = (body: string) => `#!/bin/bash\necho "$(basename "$0") $*" >>"$SANDBOX/calls.log"\n${body}\n`;

const FAKES: Record<string, string> = {
  shutdown: FAKE('exit 0'),
  systemctl: FAKE('exit 0'),
  // No apt process runs and nobody holds the dpkg locks.
  pgrep: FAKE('exit 1'),
  fuser: FAKE('exit 1'),
  'nvidia-container-runtime': FAKE('exit 0'),
  aws: FAKE(`
if [ -n "\${FAKE_AWS_FAIL:-}" ]; then echo "fatal error: An error occurred (AccessDenied) when calling the GetObject operation" >&2; exit 1; fi
args=("$@"); dst=\${args[-1]}
case "$dst" in
*bootstrap.sh) cp "$FAKE_BOOTSTRAP" "$dst" ;;
*.zip) python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("00-namespace.yaml", "kind: Namespace\\n")
    z.writestr("jobs/run.yaml", "kind: Job\\n")' "$dst" ;;
esac
exit 0`),
  'nvidia-smi': FAKE(`
if [ "$1" = -L ]; then
  for ((i = 0; i < FAKE_GPUS; i++)); do echo "GPU $i: NVIDIA L4 (UUID: GPU-host-$i)"; done
else
  echo "GPU0 X PHB"
fi`),
  k3s: FAKE(
    `if [ "$1" = --version ]; then echo "k3s version v1.36.4+k3s1 (0123abcd)"; echo "go version go1.24"; fi; exit 0`,
  ),
  kubectl: FAKE(`
case "$*" in
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
out='' body='' url='' headers=''
while [ $# -gt 0 ]; do
  case "$1" in
  -o) out=$2; shift ;;
  --data-binary) body=\${2#@}; shift ;;
  -H) headers+="$2;"; shift ;;
  -X | --retry | --max-time) shift ;;
  -*) ;;
  *) url=$1 ;;
  esac
  shift
done
if [ -n "$body" ]; then
  n=$(find "$SANDBOX" -maxdepth 1 -name 'signal-*.json' | wc -l)
  cp "$body" "$SANDBOX/signal-$n.json"
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
  */placement/availability-zone) printf 'us-west-2b' ;;
  *) exit 22 ;;
  esac ;;
https://get.k3s.io) printf '#!/bin/sh\\necho "k3s-install $INSTALL_K3S_VERSION|$INSTALL_K3S_EXEC" >>"$SANDBOX/calls.log"\\n' >"$out" ;;
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
  const path = (hostPath: string) => join(root, 'host', hostPath);
  for (const dir of ['/var/log', '/etc/systemd/system', '/usr/local/sbin', '/usr/local/bin', '/opt/lab']) {
    mkdirSync(path(dir), { recursive: true });
  }
  return {
    root,
    path,
    fake(hostPath, body) {
      writeFileSync(path(hostPath), FAKE(body));
      chmodSync(path(hostPath), 0o755);
    },
    relocate: (script) => HOST_PATHS.reduce((text, p) => text.replaceAll(p, path(p)), script),
    run(script, env = {}) {
      const file = join(root, `script-${readdirSync(root).length}.sh`);
      writeFileSync(file, this.relocate(script));
      const result = spawnSync('bash', [file], {
        encoding: 'utf8',
        timeout: 60_000,
        env: { PATH: `${bin}:${process.env.PATH}`, HOME: root, SANDBOX: root, ...env },
      });
      return { status: result.status, stdout: result.stdout, stderr: result.stderr };
    },
    calls: () => {
      const file = join(root, 'calls.log');
      return existsSync(file) ? readFileSync(file, 'utf8').trimEnd().split('\n') : [];
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
    log: () => {
      const file = path('/var/log/lab-bootstrap.log');
      return existsSync(file) ? readFileSync(file, 'utf8') : '';
    },
  };
}
