import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Testing } from 'cdk8s';
import { describe, expect, it } from 'vitest';
import { IRSA_ROLE_ANNOTATION, RESULTS_SYNC_SCRIPT } from '../../charts/results-upload.ts';
import { StudyRunnerChart } from '../../charts/study-runner.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { RESULTS_UPLOAD_IMAGE } from '../../lib/config/results-upload.ts';
import { resourceBudget } from '../../lib/study/resources.ts';
import { problems } from '../config/problems.ts';
import { tempDir } from '../temp.ts';
import { type Manifest, validateManifest } from './validate.ts';

const UPLOAD = {
  bucket: 'lab-results-123',
  prefix: 'studies/eks-1',
  region: 'eu-west-1',
  roleArn: 'arn:aws:iam::123456789012:role/lab-results',
};
const claim = (upload: unknown) => ({ runner: { results: { volume: 'claim', upload } } });

interface Container {
  name: string;
  image: string;
  restartPolicy?: string;
  command: string[];
  env: { name: string; value: string }[];
  securityContext: Record<string, unknown>;
  volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
}
interface RunnerPod {
  terminationGracePeriodSeconds?: number;
  initContainers?: Container[];
  containers: Container[];
  volumes: { name: string; emptyDir?: unknown; persistentVolumeClaim?: unknown }[];
}

function runnerObjects(overrides: unknown): Manifest[] {
  const config = parseLabConfig(overrides);
  const chart = new StudyRunnerChart(Testing.app(), '90-runner', { namespace: config.namespace, config });
  const objects = Testing.synth(chart) as Manifest[];
  for (const object of objects) validateManifest(object);
  return objects;
}
const podOf = (objects: Manifest[]) =>
  (objects.find((o) => o.kind === 'Job') as unknown as { spec: { template: { spec: RunnerPod } } }).spec
    .template.spec;
const accountOf = (objects: Manifest[]) =>
  objects.find((o) => o.kind === 'ServiceAccount') as unknown as {
    metadata: { annotations?: Record<string, string> };
  };

describe('runner.results.upload: settings', () => {
  it('accepts a bucket, prefix and region, with IRSA role or without (Pod Identity)', () => {
    expect(problems(claim(UPLOAD))).toEqual([]);
    expect(problems(claim({ ...UPLOAD, roleArn: null }))).toEqual([]);
    expect(problems(claim({ ...UPLOAD, roleArn: 'arn:aws-us-gov:iam::123456789012:role/a/b' }))).toEqual([]);
    const upload = parseLabConfig(claim({ ...UPLOAD, roleArn: undefined })).runner.results.upload;
    expect(upload).toMatchObject({ roleArn: null, everySeconds: 60, image: RESULTS_UPLOAD_IMAGE });
  });

  it('names the setting and the rule for a bad bucket, prefix, region or role ARN', () => {
    const one = (override: Record<string, unknown>) => problems(claim({ ...UPLOAD, ...override }));
    expect(one({ bucket: 'Lab_Results' })).toEqual([
      expect.stringMatching(/^runner\.results\.upload\.bucket = "[^"]+": must be an S3 bucket name/),
    ]);
    expect(one({ bucket: 'lab..results' })).toEqual([
      expect.stringMatching(/upload\.bucket = "[^"]+": must not contain two adjacent periods/),
    ]);
    expect(one({ bucket: '192.168.1.1' })).toEqual([expect.stringMatching(/IP address/)]);
    expect(one({ prefix: '/studies/' })).toEqual([
      expect.stringMatching(/^runner\.results\.upload\.prefix = "[^"]+": must be an S3 key prefix/),
    ]);
    expect(one({ region: 'Ireland' })).toEqual([
      expect.stringMatching(/^runner\.results\.upload\.region = "[^"]+": must be an AWS region code/),
    ]);
    expect(one({ roleArn: 'lab-results' })).toEqual([
      expect.stringMatching(/^runner\.results\.upload\.roleArn = "[^"]+": must be an IAM role ARN/),
    ]);
    expect(one({ everySeconds: 1 })).toHaveLength(1);
    expect(one({ image: 'public.ecr.aws/aws-cli/aws-cli:latest' })).toHaveLength(1);
  });

  it('is only allowed with volume: claim', () => {
    expect(problems({ runner: { results: { upload: UPLOAD } } })).toEqual([
      'runner.results.upload: needs runner.results.volume: claim (it copies the results claim to S3); got volume: node-folder',
    ]);
  });
});

describe('runner.results.upload: manifests', () => {
  it('annotates the runner ServiceAccount with the IRSA role only when one is set', () => {
    expect(accountOf(runnerObjects(claim(UPLOAD))).metadata.annotations).toEqual({
      [IRSA_ROLE_ANNOTATION]: UPLOAD.roleArn,
    });
    expect(
      accountOf(runnerObjects(claim({ ...UPLOAD, roleArn: null }))).metadata.annotations,
    ).toBeUndefined();
    expect(accountOf(runnerObjects(claim(null))).metadata.annotations).toBeUndefined();
  });

  it('adds a native sidecar that reads the claim read-only, with a read-only root and no privilege', () => {
    const pod = podOf(runnerObjects(claim(UPLOAD)));
    expect(pod.initContainers).toHaveLength(1);
    const sidecar = (pod.initContainers ?? [])[0];
    expect(sidecar).toMatchObject({
      name: 'results-upload',
      image: RESULTS_UPLOAD_IMAGE,
      restartPolicy: 'Always',
    });
    expect(sidecar.command).toEqual(['/bin/sh', '-c', RESULTS_SYNC_SCRIPT]);
    expect(Object.fromEntries(sidecar.env.map((e) => [e.name, e.value]))).toMatchObject({
      LAB_UPLOAD_SOURCE: '/results',
      LAB_UPLOAD_BUCKET: UPLOAD.bucket,
      LAB_UPLOAD_PREFIX: UPLOAD.prefix,
      LAB_UPLOAD_REGION: UPLOAD.region,
      LAB_UPLOAD_EVERY: '60',
      HOME: '/tmp',
    });
    expect(sidecar.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    });
    expect(sidecar.volumeMounts).toContainEqual({ name: 'results', mountPath: '/results', readOnly: true });
    expect(pod.volumes.find((v) => v.name === 'upload-scratch')?.emptyDir).toBeDefined();
    // The runner still writes the same claim; the pod gets time for the last sync.
    expect(pod.containers[0].volumeMounts.find((m) => m.name === 'results')?.readOnly).toBeUndefined();
    expect(pod.terminationGracePeriodSeconds).toBe(300);
  });

  it('adds nothing without the setting', () => {
    const pod = podOf(runnerObjects(claim(null)));
    expect(pod.initContainers).toBeUndefined();
    expect(pod.terminationGracePeriodSeconds).toBeUndefined();
    expect(pod.volumes.map((v) => v.name)).toEqual(['runner', 'results']);
  });

  it("counts the uploader in the runner node's requests", () => {
    const names = (overrides: unknown) => resourceBudget(parseLabConfig(overrides)).lines.map((l) => l.what);
    expect(names(claim(UPLOAD))).toContain('results uploader');
    expect(names(claim(null))).not.toContain('results uploader');
  });
});

/** The sync loop under dash (POSIX sh), with fake `aws` and `sleep` first on the PATH. */
function startLoop(ticks: number): {
  box: string;
  child: ChildProcess;
  calls: () => string[];
  output: () => string;
} {
  const box = tempDir('lab-upload-');
  const fake = (name: string, body: string) => {
    const file = join(box, 'bin', name);
    writeFileSync(file, `#!/bin/sh\n${body}\n`);
    chmodSync(file, 0o755);
  };
  mkdirSync(join(box, 'bin'));
  // aws: records its arguments; fails (exit 2) once when a `fail` file is there.
  fake(
    'aws',
    `echo "$*" >> "${box}/calls.log"
if [ -e "${box}/fail" ]; then rm -f "${box}/fail"; echo "upload failed: AccessDenied" >&2; exit 2; fi`,
  );
  // sleep: records the interval; the first `ticks` waits are short so the loop runs quickly, the
  // next one lasts until the loop kills it, so a SIGTERM is sure to land in a wait.
  fake(
    'sleep',
    `echo "$1" >> "${box}/sleeps.log"
if [ "$(wc -l < "${box}/sleeps.log")" -le ${ticks} ]; then exec /bin/sleep 0.05; fi
exec /bin/sleep 59.5`,
  );
  let out = '';
  const child = spawn('/bin/sh', ['-c', RESULTS_SYNC_SCRIPT], {
    env: {
      PATH: `${box}/bin:/usr/bin:/bin`,
      LAB_UPLOAD_SOURCE: '/results',
      LAB_UPLOAD_BUCKET: 'bkt',
      LAB_UPLOAD_PREFIX: 'pre/fix',
      LAB_UPLOAD_REGION: 'eu-west-1',
      LAB_UPLOAD_EVERY: '30',
    },
  });
  child.stdout?.on('data', (d) => {
    out += d;
  });
  child.stderr?.on('data', (d) => {
    out += d;
  });
  const calls = () => {
    const log = join(box, 'calls.log');
    return existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : [];
  };
  return { box, child, calls, output: () => out };
}

/** Polls until `check` holds; the limit only ends a hang (a loaded machine runs dash slowly). */
async function until(check: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 120_000;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** How many waits the loop has started. */
const sleeps = (box: string) => {
  const log = join(box, 'sleeps.log');
  return existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').length : 0;
};

/** Its exit code once its output is all read ('close': 'exit' can come before the last output). */
const exited = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));

describe('the sync loop (run for real)', () => {
  it('is clean POSIX shell', () => {
    const result = spawnSync('shellcheck', ['-s', 'sh', '-'], {
      input: RESULTS_SYNC_SCRIPT,
      encoding: 'utf8',
    });
    expect(`${result.stdout}${result.stderr}`).toBe('');
  });

  it('syncs periodically, logs a failed sync and retries it, and syncs once more on SIGTERM', async () => {
    const loop = startLoop(3);
    writeFileSync(join(loop.box, 'fail'), '');
    const done = exited(loop.child);
    // The failure's line too: it comes through a pipe, which this process may read later.
    await until(() => loop.calls().length >= 3 && /failed \(exit 2\)/.test(loop.output()), 'three syncs');
    expect(loop.calls()[0]).toBe('s3 sync /results s3://bkt/pre/fix/ --region eu-west-1 --only-show-errors');
    expect(new Set(loop.calls()).size).toBe(1);
    expect(loop.output()).toMatch(/sync to s3:\/\/bkt\/pre\/fix\/ failed \(exit 2\); retrying in 30 s/);
    expect(readFileSync(join(loop.box, 'sleeps.log'), 'utf8')).toMatch(/^30\n/);
    // Stop while it waits between syncs, as the kubelet does when the runner has exited.
    await until(() => sleeps(loop.box) === 4, 'the fourth wait');
    expect(loop.calls()).toHaveLength(4);
    loop.child.kill('SIGTERM');
    expect(await done).toBe(0);
    expect(loop.calls()).toHaveLength(5);
    expect(loop.output()).toMatch(/final sync to s3:\/\/bkt\/pre\/fix\/ done/);
  });

  it('exits 0 when the final sync fails, saying the results stay on the claim', async () => {
    const loop = startLoop(0);
    const done = exited(loop.child);
    await until(() => sleeps(loop.box) === 1, 'the first wait');
    writeFileSync(join(loop.box, 'fail'), '');
    loop.child.kill('SIGTERM');
    expect(await done).toBe(0);
    expect(loop.output()).toMatch(
      /final sync to s3:\/\/bkt\/pre\/fix\/ failed \(exit 2\); the results stay on the claim/,
    );
  });
});
