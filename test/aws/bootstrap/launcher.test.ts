// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the strings are CDK token placeholders, which look like template placeholders on purpose
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { renderLauncher, USER_DATA_LIMIT_BYTES } from '../../../lib/aws/bootstrap/launcher.ts';
import { tempDir } from '../../temp.ts';
import { needs, SHELLCHECK } from '../../tools.ts';
import { fakeCommand, makeSandbox, type Sandbox, shellcheck } from './sandbox.ts';
import { writeZip } from './zip.ts';

/** What CDK tokens look like in a string at synth time. */
const tokens = {
  region: '${Token[AWS.Region.10]}',
  bootstrapS3Uri: '${Token[TOKEN.231]}',
  manifestsS3Uri: '${Token[TOKEN.232]}',
  waitHandleUrl: '${Token[TOKEN.233]}',
  resultsBucket: '${Token[TOKEN.234]}',
  stackName: '${Token[AWS.StackName.7]}',
  lifetimeMinutes: 480,
};

/** Values of the shape CloudFormation resolves them to; the presigned URL is about 1 KB. */
const WAIT_URL = `https://cloudformation-waitcondition-us-west-2.s3-us-west-2.amazonaws.com/arn%3Aaws%3Acloudformation%3Aus-west-2%3A123456789012%3Astack/LlmGatewayLab/abc/Ready?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20250101T000000Z&X-Amz-SignedHeaders=host&X-Amz-Expires=86399&X-Amz-Credential=AKIAEXAMPLE%2F20250101%2Fus-west-2%2Fs3%2Faws4_request&X-Amz-Signature=${'f'.repeat(700)}`;
const concrete = {
  region: 'us-west-2',
  bootstrapS3Uri: 's3://cdk-hnb659fds-assets-123456789012-us-west-2/0a1b2c.zip',
  manifestsS3Uri: 's3://cdk-hnb659fds-assets-123456789012-us-west-2/3d4e5f.zip',
  waitHandleUrl: WAIT_URL,
  resultsBucket: 'llmgatewaylab-results1234-abcdef',
  stackName: 'LlmGatewayLab',
  lifetimeMinutes: 480,
};

describe('renderLauncher', () => {
  test('is a small strict bash script that logs to the bootstrap log', () => {
    const script = renderLauncher(tokens);
    expect(script.startsWith('#!/bin/bash\n')).toBe(true);
    expect(script).toContain('set -euo pipefail');
    expect(script).toContain('exec >>/var/log/lab-bootstrap.log 2>&1');
    expect(Buffer.byteLength(script)).toBeLessThan(4096);
    expect(Buffer.byteLength(renderLauncher(concrete))).toBeLessThan(USER_DATA_LIMIT_BYTES);
  });

  test('places CDK tokens verbatim in single-quoted assignments', () => {
    const script = renderLauncher(tokens);
    expect(script).toContain("export LAB_REGION='${Token[AWS.Region.10]}'");
    expect(script).toContain("export WAIT_HANDLE_URL='${Token[TOKEN.233]}'");
    expect(script).toContain("bootstrap_uri='${Token[TOKEN.231]}'");
    expect(script).toContain("manifests_uri='${Token[TOKEN.232]}'");
    expect(script).toContain("export LAB_RESULTS_BUCKET='${Token[TOKEN.234]}'");
    expect(script).toContain("export LAB_STACK_NAME='${Token[AWS.StackName.7]}'");
  });

  test('refuses a value that would end its quotes', () => {
    expect(() => renderLauncher({ ...concrete, stackName: "it's" })).toThrow(
      /stackName must not contain a single quote/,
    );
  });

  test('expands the wait handle URL only as the argument of the signal PUT', () => {
    const expansions = renderLauncher(tokens)
      .split('\n')
      .filter((line) => line.includes('$WAIT_HANDLE_URL'));
    expect(expansions).toEqual([
      `  curl -sS --fail --retry 5 --retry-all-errors --max-time 60 -X PUT -H 'Content-Type:' --data-binary @launcher-signal.json "$WAIT_HANDLE_URL" >/dev/null || echo "launcher: no signal sent"`,
    ]);
  });

  test.runIf(needs(SHELLCHECK, import.meta.url, 'the shellcheck test'))(
    'passes shellcheck with resolved values',
    () => {
      expect(shellcheck(renderLauncher(concrete))).toBe('');
    },
  );
});

/**
 * A bootstrap folder archive whose main.sh is `main`, as the asset is a zip of the folder: made
 * once per `main` for the file, in this process (the fake S3 copies it, the launcher unpacks it).
 */
const zips = new Map<string, string>();
function bootstrapZip(main: string): string {
  const cached = zips.get(main);
  if (cached) return cached;
  const zip = join(tempDir('lab-launcher-zip-'), 'bootstrap-stub.zip');
  writeZip(zip, { 'main.sh': main, 'settings.env': '' });
  zips.set(main, zip);
  return zip;
}

/**
 * The manifests archive the fake S3 serves (a namespace and a Job), made once for the file: the
 * fake curl made it again for every launch (a python3 start each).
 */
let manifestsZipFile: string | undefined;
function manifestsZip(): string {
  if (manifestsZipFile) return manifestsZipFile;
  const zip = join(tempDir('lab-launcher-zip-'), 'manifests.zip');
  writeZip(zip, { '00-namespace.yaml': 'kind: Namespace\n', 'jobs/run.yaml': 'kind: Job\n' });
  manifestsZipFile = zip;
  return zip;
}

/** A run made on first use and shared by the tests that only read it. */
function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => {
    made ??= { value: make() };
    return made.value;
  };
}

/** A launcher's pauses between S3 tries, made instant. */
function instantSleep(box: Sandbox): void {
  writeFileSync(join(box.root, 'bin', 'sleep'), '#!/bin/bash\necho "sleep $*" >>"$SANDBOX/calls.log"\n');
  chmodSync(join(box.root, 'bin', 'sleep'), 0o755);
}

describe('the launcher, run in a sandbox', () => {
  /**
   * `prepare` sets the sandbox up before the run; `aws: false` is a host without the AWS CLI (a
   * Canonical Ubuntu image): no fake aws, and none on the PATH.
   */
  function launch(
    env: Record<string, string>,
    bootstrap = 'exit 0\n',
    { prepare, aws = true }: { prepare?: (box: Sandbox) => void; aws?: boolean } = {},
  ) {
    const box = makeSandbox();
    instantSleep(box);
    prepare?.(box);
    if (!aws) rmSync(join(box.root, 'bin', 'aws'));
    const result = box.run(renderLauncher(concrete), {
      FAKE_MANIFESTS_ZIP: manifestsZip(),
      FAKE_BOOTSTRAP_ZIP: bootstrapZip(bootstrap),
      ...(aws ? {} : { PATH: pathWithout('aws', join(box.root, 'bin')) }),
      ...env,
    });
    return { box, result };
  }

  // Runs read by several tests each (a launch is a few dozen processes, two python3 among them).
  /** S3 refuses every download; the clock before and after the run brackets the deadline. */
  const refused = once(() => {
    const started = Math.floor(Date.now() / 1000) * 1000;
    const run = launch({ FAKE_S3_FAIL: '1' });
    return { ...run, started, ended: Date.now() };
  });
  /**
   * A bootstrap that notes its environment, the manifests it got, where it ran from and whether it
   * found an AWS CLI, on a host without one.
   */
  const unpacked = once(() =>
    launch(
      {},
      `env | grep -E '^(LAB_|WAIT_HANDLE_URL|AWS_DEFAULT_REGION)' | sort >"$SANDBOX/env.txt"
ls -R "$LAB_MANIFESTS_DIR" >"$SANDBOX/manifests.txt"
echo "main.sh ran from $(dirname "$0")" >"$SANDBOX/ran.txt"
command -v aws >"$SANDBOX/aws-found.txt" || echo none >"$SANDBOX/aws-found.txt"
`,
      { aws: false },
    ),
  );

  test('signals FAILURE to the wait handle when the S3 download fails, and logs no URL', () => {
    const { box, result } = refused();
    expect(result.status).not.toBe(0);
    const signals = box.signals();
    expect(signals).toHaveLength(1);
    const [signal] = signals;
    expect(signal.url).toBe(WAIT_URL);
    expect(signal.body).toMatchObject({
      Status: 'FAILURE',
      UniqueId: 'bootstrap',
      Data: 'launcher: download the bootstrap',
    });
    expect(signal.body.Reason).toContain('AccessDenied');
    expect(signal.body.Reason).toContain('launcher: download the bootstrap failed (exit 1)');
    // Five tries, further apart each time, before giving up.
    expect(box.calls().filter((c) => c.includes('--aws-sigv4'))).toHaveLength(5);
    expect(box.calls().filter((c) => c.startsWith('sleep '))).toEqual([
      'sleep 5',
      'sleep 10',
      'sleep 15',
      'sleep 20',
    ]);
    expect(box.calls().some((c) => c.startsWith('curl ') && c.includes('-X PUT'))).toBe(true);
    expect(box.log()).not.toContain('X-Amz-Signature');
    expect(box.log()).not.toContain('cloudformation-waitcondition');
  });

  test('unpacks the manifests archive and runs the bootstrap with its environment', () => {
    const { box, result } = unpacked();
    expect(result.status).toBe(0);
    expect(box.signals()).toEqual([]);
    const env = readFileSync(join(box.root, 'env.txt'), 'utf8');
    expect(env).toContain('AWS_DEFAULT_REGION=us-west-2');
    expect(env).toContain('LAB_REGION=us-west-2');
    expect(env).toContain('LAB_RESULTS_BUCKET=llmgatewaylab-results1234-abcdef');
    expect(env).toContain('LAB_STACK_NAME=LlmGatewayLab');
    expect(env).toContain(`LAB_MANIFESTS_DIR=${box.path('/opt/lab/manifests')}`);
    expect(env).toContain(`WAIT_HANDLE_URL=${WAIT_URL}`);
    expect(readFileSync(join(box.root, 'manifests.txt'), 'utf8')).toMatch(/00-namespace\.yaml[\s\S]*jobs/);
    expect(box.calls().filter((c) => c.includes('--aws-sigv4'))).toEqual([
      `curl -sS --fail --max-time 300 -K - --aws-sigv4 aws:amz:us-west-2:s3 -H x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 -o bootstrap.zip https://cdk-hnb659fds-assets-123456789012-us-west-2.s3.us-west-2.amazonaws.com/0a1b2c.zip`,
      `curl -sS --fail --max-time 300 -K - --aws-sigv4 aws:amz:us-west-2:s3 -H x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 -o manifests.zip https://cdk-hnb659fds-assets-123456789012-us-west-2.s3.us-west-2.amazonaws.com/3d4e5f.zip`,
    ]);
  });

  /**
   * A relaunched host (a deadline written by its first boot) whose S3 downloads fail at first:
   * read by the retry test and the one that keeps the deadline.
   */
  const relaunched = once(() =>
    launch({ FAKE_S3_FAIL_TIMES: '2' }, 'exit 0\n', {
      prepare: (box) => {
        mkdirSync(box.path('/opt/lab'), { recursive: true });
        writeFileSync(box.path('/opt/lab/deadline'), '2030-01-01T00:00:00Z\n');
      },
    }),
  );

  test('retries an S3 download that fails at first, then goes on', () => {
    const { box, result } = relaunched();
    expect(result.status, box.log()).toBe(0);
    expect(box.signals()).toEqual([]);
    expect(box.calls().filter((c) => c.includes('--aws-sigv4'))).toHaveLength(4);
    expect(box.log()).toContain(`launcher: S3 GET of ${concrete.bootstrapS3Uri} failed (attempt 2 of 5)`);
  });

  test('runs main.sh of the unpacked bootstrap folder', () => {
    const { box, result } = unpacked();
    expect(result.status).toBe(0);
    expect(readFileSync(join(box.root, 'ran.txt'), 'utf8').trim()).toBe(
      `main.sh ran from ${box.path('/opt/lab/bootstrap')}`,
    );
    expect(existsSync(box.path('/opt/lab/bootstrap/settings.env'))).toBe(true);
  });

  test('signals FAILURE when the bootstrap dies without signalling', () => {
    const { box, result } = launch({}, 'echo "bootstrap: something broke"\nexit 3\n');
    expect(result.status).toBe(3);
    const [signal] = box.signals();
    expect(signal.body).toMatchObject({ Status: 'FAILURE', Data: 'launcher: run the bootstrap' });
    expect(signal.body.Reason).toContain('bootstrap: something broke');
  });

  test('leaves the signal to the bootstrap once it has sent one', () => {
    // The stub runs unrelocated: it names the sandbox's marker itself.
    const { box, result } = launch({}, 'touch "$SANDBOX/host/opt/lab/signalled"\nexit 1\n');
    expect(result.status).toBe(1);
    expect(existsSync(box.path('/opt/lab/signalled'))).toBe(true);
    expect(box.signals()).toEqual([]);
  });

  // The keys go to curl's config as they are, read by bash (no python3 start per download): a
  // value that would need escaping there is refused, as lab-aws refuses it after the launcher.
  test('refuses role keys it cannot hand curl as they are (an escaped quote), before any S3 request', () => {
    const box = makeSandbox();
    writeFileSync(
      join(box.root, 'bin', 'curl'),
      fakeCommand(`case "$*" in
*/api/token) printf 'imds-token' ;;
*/iam/security-credentials/) printf 'LabHostRole' ;;
*/iam/security-credentials/LabHostRole) printf '%s' '{"Code" : "Success", "AccessKeyId" : "ASIAFAKEKEYID", "SecretAccessKey" : "fake\\"secret", "Token" : "token"}' ;;
*) exit 99 ;;
esac`),
    );
    const script = renderLauncher(concrete);
    const functions = script.slice(script.indexOf('imds() {'), script.indexOf('\naws_get() {'));
    const result = box.run(
      `LAB_REGION=us-west-2\n${functions}\ns3_get s3://bucket/key out || echo "status $?"\n`,
    );
    expect(result.stdout).toBe(
      "launcher: no SecretAccessKey of the expected form in the role's keys\nstatus 1\n",
    );
    expect(box.calls()).toHaveLength(3);
    expect(box.calls().some((c) => c.includes('--aws-sigv4'))).toBe(false);
  });

  test('arms the deadline before anything else: shutdown in the lifetime, with the deadline written', () => {
    const { box, result, started, ended } = refused();
    expect(result.status).not.toBe(0);
    const calls = box.calls();
    expect(calls[0]).toBe(`shutdown -h +480 lab lifetime reached before the bootstrap armed its cost guard`);
    // The lifetime from the moment the launcher ran, however long the run took on a loaded machine.
    const deadline = Date.parse(readFileSync(box.path('/opt/lab/deadline'), 'utf8').trim());
    expect(deadline).toBeGreaterThanOrEqual(started + 480 * 60_000);
    expect(deadline).toBeLessThanOrEqual(ended + 480 * 60_000);
  });

  test("keeps a deadline written before (the bootstrap of a reboot keeps the first boot's)", () => {
    const { box, result } = relaunched();
    expect(result.status, box.log()).toBe(0);
    expect(readFileSync(box.path('/opt/lab/deadline'), 'utf8')).toBe('2030-01-01T00:00:00Z\n');
  });

  test('needs no AWS CLI: runs with no aws on the PATH, signing S3 with the role keys from IMDSv2', () => {
    const { box, result } = unpacked();
    expect(result.status, box.log()).toBe(0);
    expect(readFileSync(join(box.root, 'aws-found.txt'), 'utf8').trim()).toBe('none');
    expect(box.signals()).toEqual([]);
    const calls = box.calls();
    // For each object: an IMDSv2 session token, the role, its keys, then the signed GET.
    const imds = 'http://169.254.169.254/latest';
    const s3 = 'https://cdk-hnb659fds-assets-123456789012-us-west-2.s3.us-west-2.amazonaws.com';
    expect(calls.filter((c) => c.startsWith('curl -sS')).map((c) => c.slice(c.lastIndexOf(' ') + 1))).toEqual(
      ['0a1b2c.zip', '3d4e5f.zip'].flatMap((object) => [
        `${imds}/api/token`,
        `${imds}/meta-data/iam/security-credentials/`,
        `${imds}/meta-data/iam/security-credentials/LabHostRole`,
        `${s3}/${object}`,
      ]),
    );
    expect(calls.filter((c) => c.includes('--aws-sigv4 aws:amz:us-west-2:s3'))).toHaveLength(2);
    // The keys went through curl's stdin: neither the log nor any command line has them.
    for (const text of [box.log(), calls.join('\n')]) {
      expect(text).not.toContain('fake/secret+key-never-logged');
      expect(text).not.toContain('fake-session-token-never-logged');
    }
  });

  test('names a curl that cannot sign S3 requests in its FAILURE signal when there is no AWS CLI', () => {
    const { box, result } = launch({ FAKE_OLD_CURL: '7.81.0' }, 'exit 0\n', { aws: false });
    expect(result.status).not.toBe(0);
    const [signal] = box.signals();
    expect(signal.body).toMatchObject({ Status: 'FAILURE', Data: 'launcher: check curl' });
    expect(signal.body.Reason).toContain(
      'this curl (curl 7.81.0 (x86_64-pc-linux-gnu)) cannot sign S3 requests (--aws-sigv4 signs the session token header from curl 7.86.0 on) and there is no AWS CLI',
    );
  });

  test("with a curl older than 7.86.0, downloads with the image's AWS CLI (the Ubuntu 22.04 Deep Learning AMI)", () => {
    const { box, result } = launch({ FAKE_OLD_CURL: '7.81.0' });
    expect(result.status, box.log()).toBe(0);
    expect(box.signals()).toEqual([]);
    expect(box.calls().filter((c) => c.includes('--aws-sigv4'))).toEqual([]);
    expect(box.calls().filter((c) => c.startsWith('aws '))).toEqual([
      `aws s3 cp --only-show-errors --region us-west-2 ${concrete.bootstrapS3Uri} bootstrap.zip`,
      `aws s3 cp --only-show-errors --region us-west-2 ${concrete.manifestsS3Uri} manifests.zip`,
    ]);
  });
});

/** The PATH of this machine without any folder holding `name`, after `first`. */
function pathWithout(name: string, first: string): string {
  const dirs = (process.env.PATH ?? '').split(':').filter((dir) => dir && !existsSync(join(dir, name)));
  return [first, ...dirs].join(':');
}
