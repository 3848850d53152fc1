import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { synthesizeCluster } from '../../../charts/synthesize.ts';
import { bootstrapSteps, READY_MARKER } from '../../../lib/aws/bootstrap/bootstrap.ts';
import { parseLabConfig } from '../../../lib/config/load.ts';
import type { LabConfig } from '../../../lib/config/schema.ts';
import { tempDir } from '../../temp.ts';
import { onlySteps } from './only-steps.ts';
import { makeSandbox, type Sandbox } from './sandbox.ts';

/**
 * The bootstrap's rehearsals for the bootstrap*.test.ts files: the configurations they run, the
 * launcher's environment, and `rehearse`, one bootstrap run against fake system commands.
 */

export const defaults = parseLabConfig({});
/** Another K3s line, three replicas and llm-d's second set: six GPUs, so a g6.48xlarge. */
export const other = parseLabConfig({
  instance: { type: 'g6.48xlarge', gpus: 8, vcpus: 192, memoryGiB: 768, pricePerHourUsd: 13.35 },
  k3s: { version: 'v1.35.2+k3s1' },
  vllm: { replicas: 3 },
  workload: { partitionSeeds: [1, 2, 3] },
  study: { optionalArms: ['llmd-precise'] },
});
export const aiGateway = parseLabConfig({ study: { optionalArms: ['ai-gateway'] } });
/**
 * `other` with the ai-gateway arm and runner.terminateWhenDone too: one rehearsal checks all three
 * (bootstrap.test.ts).
 */
export const otherWithAiGateway = parseLabConfig({
  instance: { type: 'g6.48xlarge', gpus: 8, vcpus: 192, memoryGiB: 768, pricePerHourUsd: 13.35 },
  k3s: { version: 'v1.35.2+k3s1' },
  vllm: { replicas: 3 },
  workload: { partitionSeeds: [1, 2, 3] },
  study: { optionalArms: ['llmd-precise', 'ai-gateway'] },
  runner: { terminateWhenDone: true },
});
export const whenDone = parseLabConfig({ runner: { terminateWhenDone: true } });

export const configs: [string, LabConfig][] = [
  ['default', defaults],
  ['3 replicas, llmd-precise, K3s v1.35.2', other],
  ['ai-gateway', aiGateway],
];

export const ENV = {
  WAIT_HANDLE_URL: 'https://wait.example/handle?X-Amz-Signature=secret',
  LAB_REGION: 'us-west-2',
  LAB_RESULTS_BUCKET: 'results-bucket',
  LAB_STACK_NAME: 'LlmGatewayLab',
};
export const LOG_OBJECT = 's3://results-bucket/LlmGatewayLab/host/bootstrap.log';
/** The PutObject of the log, as the fake S3 records it (lab-aws put and sync-up). */
export const LOG_PUT = 'PUT results-bucket/LlmGatewayLab/host/bootstrap.log';
/** No waiting between polls or signal and S3 retries: the fakes answer at once. */
export const FAST = { WAIT_INTERVAL_SECONDS: '0', SIGNAL_RETRY_SECONDS: '0', AWS_RETRY_SECONDS: '0' };

/** The manifests folder of a configuration, synthesized once: the bootstrap only reads it. */
export const synthesized = new Map<LabConfig, string>();
function manifestsOf(config: LabConfig): string {
  let dir = synthesized.get(config);
  if (!dir) {
    dir = tempDir('lab-manifests-');
    synthesizeCluster(config, dir);
    synthesized.set(config, dir);
  }
  return dir;
}

/** The environment of a bootstrap run of `config` (the launcher's, and the fakes' answers). */
function environment(config: LabConfig, manifests: string, fakes: Record<string, string>) {
  const gpus = String(config.instance.gpus);
  return {
    ...ENV,
    LAB_MANIFESTS_DIR: manifests,
    FAKE_GPUS: gpus,
    FAKE_ALLOCATABLE: gpus,
    FAKE_SERVED: config.model.servedName,
    // No test of these files reads the modes of lab-aws's curl config files (lab-aws.test.ts does).
    FAKE_CONFIG_MODES_UNREAD: '1',
    ...fakes,
  };
}

/** What a test reads of a run that ended: the calls, and where one first matched. */
function ended(
  box: Sandbox,
  result: { status: number | null; stdout: string; stderr: string },
  manifests: string,
) {
  const calls = box.calls();
  const index = (pattern: RegExp) => calls.findIndex((c) => pattern.test(c));
  return { box, result, calls, index, manifests };
}

/** A bootstrap run against fake system commands and a manifests folder synthesized from the config. */
export function rehearse(
  config: LabConfig,
  fakes: Record<string, string> = {},
  prepare?: (box: Sandbox) => void,
  settings: Record<string, string> = {},
  box = makeSandbox(),
) {
  const manifests = manifestsOf(config);
  prepare?.(box);
  const result = box.bootstrap(config, environment(config, manifests, fakes), { ...FAST, ...settings });
  return ended(box, result, manifests);
}

/**
 * `rehearse` in the background (`Sandbox.runFileInBackground`), for a run that waits on real time:
 * it goes on while the test file runs its other tests. Its stdout and stderr are not kept.
 */
export async function rehearseInBackground(
  config: LabConfig,
  fakes: Record<string, string> = {},
  settings: Record<string, string> = {},
): Promise<Rehearsal> {
  const box = makeSandbox();
  const manifests = manifestsOf(config);
  box.writeBootstrap(config, { ...FAST, ...settings });
  const { status } = await box.runFileInBackground(
    join(box.bootstrapDir, 'main.sh'),
    environment(config, manifests, fakes),
  );
  return ended(box, { status, stdout: '', stderr: '' }, manifests);
}

/** What `rehearse` returns. */
export type Rehearsal = ReturnType<typeof rehearse>;

/** A rehearsal made on first use and shared by the tests that only read it. */
export function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => {
    made ??= { value: make() };
    return made.value;
  };
}

/**
 * `otherWithAiGateway`'s bootstrap (with a Helm already installed), read by five tests. S3 refuses
 * to list the earlier studies, which the bootstrap rides out (logged, nothing restored): the test
 * of that reads this run too. The configuration has runner.terminateWhenDone, which only adds a
 * watcher in step 1: the test of that watcher reads this run too.
 */
export const otherRehearsal = once(() =>
  rehearse(otherWithAiGateway, { FAKE_S3_LIST_DENIED: '1' }, (b) => b.fake('/usr/local/bin/helm', 'exit 0')),
);

/**
 * The default configuration's host booted twice, read by most tests of bootstrap.test.ts. The
 * first boot is the whole bootstrap, and it goes wrong in three ways it rides out, each in its own
 * step: apt's shutdown helper runs (pgrep finds "unattended-upgr"), the WaitCondition refuses the
 * first two signals (403), and S3 holds the studies of an earlier host (one study, two objects,
 * listed one key per page). Everything a fault-free run shows holds of it too (every step in
 * order, one SUCCESS signal, ...), so it is also the file's default run. The second boot has no
 * metadata service and runs only the steps its tests read (onlySteps, main.sh's own loop): step 1,
 * which keeps the first boot's deadline, and K3s's, which writes host.json. What the first boot
 * left is kept as it was when it ended (`afterFirst`): the second adds to the log and the calls,
 * and rewrites host.json and the units of step 1.
 */
export const defaultRehearsal = once(() => {
  const box = makeSandbox();
  box.putS3Object('results-bucket/LlmGatewayLab/studies/s-1/study.json', '{"id":"s-1"}');
  box.putS3Object('results-bucket/LlmGatewayLab/studies/s-1/runs/r 1.json', '{"run":1}');
  const pgrep = (b: Sandbox) =>
    writeFileSync(join(b.root, 'bin', 'pgrep'), '#!/bin/bash\necho "1234 unattended-upgr"\nexit 0\n');
  const started = Math.floor(Date.now() / 1000) * 1000;
  const first = rehearse(defaults, { FAKE_S3_PAGE: '1', FAKE_SIGNAL_403: '2' }, pgrep, {}, box);
  const ended = Date.now();
  const afterFirst = {
    log: box.log(),
    signals: box.signals(),
    awsRequests: box.awsRequests(),
    systemdReloads: box.systemdReloads(),
    signalled: existsSync(box.path('/opt/lab/signalled')),
    ready: existsSync(box.path(READY_MARKER)),
    deadline: readFileSync(box.path('/opt/lab/deadline'), 'utf8').trim(),
    timer: readFileSync(box.path('/etc/systemd/system/lab-deadline.timer'), 'utf8'),
    hostJson: readFileSync(box.path('/var/lib/lab/results/host/host.json'), 'utf8'),
  };
  const secondSteps = onlySteps(bootstrapSteps(defaults), ['arm_cost_guard', 'install_k3s']);
  const second = rehearse(defaults, { FAKE_NO_IMDS: '1' }, undefined, secondSteps, box);
  return {
    box,
    first,
    second,
    started,
    ended,
    afterFirst,
    secondLog: box.log().slice(afterFirst.log.length),
  };
});
