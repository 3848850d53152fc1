import type { PriceOf } from '../doctor/live-hosts.ts';
import { STATUS_FILE } from '../runner/layout.ts';
import type { StudyStatus } from '../runner/status.ts';
import { type ControlContext, controlError } from './context.ts';
import { downloadResults, formatBytes, readSyncedCopy, syncedCopyLine } from './download.ts';
import {
  HOST_EXIT,
  HOST_STATUS_FILE,
  type HostReport,
  parseHostReport,
  type RunnerJob,
  type RunnerJobState,
  renderReadStatus,
  renderStartStudy,
  renderSyncResults,
  type StartRequest,
} from './host-scripts.ts';
import { showLabHosts } from './lab-hosts.ts';
import { commandFailed, runOnHost } from './run-command.ts';
import { checklistLines } from './smoke-uploads.ts';
import { formatStudyStatus, parseStudyStatus } from './status-format.ts';
import { type HostClock, studyClockLines } from './study-clock.ts';
import {
  describeInstance,
  describeTestbed,
  instanceState,
  notRunningReason,
  type Testbed,
  testbedArgs,
  testbedName,
} from './testbed.ts';

/** Limits of the scripts on the host, in seconds. */
export const HOST_TIMEOUTS = { start: 300, status: 60, sync: 600 } as const;

async function runningTestbed(ctx: ControlContext): Promise<Testbed> {
  const testbed = await describeTestbed(ctx);
  const state = await instanceState(ctx, testbed.instanceId);
  if (state !== 'running') {
    throw controlError(
      'instance-not-running',
      `Cannot start the study: ${notRunningReason(testbed.instanceId, state)}. Launch a new host with npx cdk deploy -c relaunch=$(date +%s); results already synced stay in s3://${testbed.bucket}/${testbed.prefix} (lab results ${testbedArgs(testbed)}).`,
    );
  }
  return testbed;
}

function studyStatusOf(report: HostReport, where: string): StudyStatus | undefined {
  if (report.statusText === undefined) return undefined;
  const status = parseStudyStatus(report.statusText);
  if (!status) {
    throw controlError(
      'bad-status',
      `${where} is not a status file of the study runner: ${report.statusText.trim().slice(0, 200)}`,
    );
  }
  return status;
}

/** A status that says running while its Job has ended is stale: the runner died mid-study. */
function staleWarning(status: StudyStatus, job: RunnerJobState | undefined): string | undefined {
  if (status.state !== 'running' && status.state !== 'starting') return undefined;
  if (job !== 'failed' && job !== 'succeeded' && job !== 'absent') return undefined;
  return `note: the runner Job is ${job}, so this status is stale: the runner stopped without finishing. lab run starts it again; valid runs are kept.`;
}

/**
 * `lab run`: starts the study runner on the testbed, or says that it is already running (resume
 * is automatic: the runner skips the runs that already have a valid record).
 */
export async function startStudy(
  ctx: ControlContext,
  job: RunnerJob,
  start: StartRequest = {},
): Promise<void> {
  const testbed = await runningTestbed(ctx);
  ctx.write(`stack ${testbedName(testbed)}: instance ${testbed.instanceId} in ${ctx.region}`);
  const result = await runOnHost(ctx, testbed.instanceId, {
    comment: `lab run: start the study of ${testbedName(testbed)}`,
    lines: renderStartStudy(job, start),
    timeoutSeconds: HOST_TIMEOUTS.start,
  });
  if (result.status !== 'Success') {
    if (result.exitCode === HOST_EXIT.notReady) {
      throw controlError(
        'not-ready',
        `The testbed is still bootstrapping, so the study cannot start yet. ${result.stderr.trim()}\nWait until cdk deploy has returned (with runner.autoStart the study then starts by itself).`,
      );
    }
    throw commandFailed('Starting the study runner', testbed.instanceId, result);
  }
  const report = parseHostReport(result.stdout);
  for (const line of report.lines) ctx.write(line);
  const status = studyStatusOf(report, HOST_STATUS_FILE);
  if (report.job === 'active') {
    ctx.write('resume: the runner is active; nothing was started.');
  }
  if (status) {
    const heading = report.job === 'active' ? 'progress:' : 'status.json as the previous runner left it:';
    ctx.write(heading);
    for (const line of formatStudyStatus(status, ctx.now())) ctx.write(`  ${line}`);
  } else {
    ctx.write('no status.json yet: the runner writes it once it starts (it first waits for every replica).');
  }
  ctx.write(`watch it: lab status ${testbedArgs(testbed)}`);
}

/**
 * `lab status`: status.json from the host through SSM, or - when the instance is gone - the last
 * copy the host synced to the results bucket.
 */
export async function showStatus(
  ctx: ControlContext,
  job: RunnerJob,
  price: Omit<HostClock, 'launchedAt'> = { pricePerHourUsd: 0, maxLifetimeHours: 0 },
  priceOf?: PriceOf,
): Promise<void> {
  const testbed = await describeTestbed(ctx);
  const { state, launchedAt } = await describeInstance(ctx, testbed.instanceId);
  if (state !== 'running') {
    let failure: unknown;
    try {
      await showSyncedStatus(ctx, testbed, notRunningReason(testbed.instanceId, state));
    } catch (error) {
      failure = error;
    }
    // Whatever the study's copy says: the hosts that still bill (an agent outliving its server).
    // Their lookup failing does not hide why the study's status could not be read.
    if (priceOf) await showLabHosts(ctx, testbed.stackName, priceOf).catch((error) => (failure ??= error));
    if (failure !== undefined) throw failure;
    return;
  }
  const result = await runOnHost(ctx, testbed.instanceId, {
    comment: `lab status: progress of ${testbedName(testbed)}`,
    lines: renderReadStatus(job),
    timeoutSeconds: HOST_TIMEOUTS.status,
  });
  if (result.status !== 'Success')
    throw commandFailed('Reading the study status', testbed.instanceId, result);
  const report = parseHostReport(result.stdout);
  const status = studyStatusOf(report, HOST_STATUS_FILE);
  if (!status) {
    throw controlError(
      'no-status',
      `The study has not started yet: there is no ${HOST_STATUS_FILE} on instance ${testbed.instanceId} (runner job: ${report.job ?? 'unknown'}). Start it with lab run ${testbedArgs(testbed)}; with runner.autoStart it starts when the bootstrap is done, and the runner writes status.json once every replica answers.`,
    );
  }
  ctx.write(
    `study on ${testbed.instanceId} (stack ${testbedName(testbed)}), runner job: ${report.job ?? 'unknown'}`,
  );
  for (const line of formatStudyStatus(status, ctx.now())) ctx.write(line);
  const host = price.pricePerHourUsd > 0 ? { ...price, ...(launchedAt ? { launchedAt } : {}) } : { ...price };
  for (const line of studyClockLines(status, host, ctx.now())) ctx.write(line);
  const stale = staleWarning(status, report.job);
  if (stale) ctx.write(stale);
  if (status.checklist)
    for (const line of await checklistLines(ctx, testbed, status.checklist, true)) ctx.write(line);
  if (priceOf) await showLabHosts(ctx, testbed.stackName, priceOf);
}

async function showSyncedStatus(ctx: ControlContext, testbed: Testbed, why: string): Promise<void> {
  const copy = await readSyncedCopy(ctx, testbed, STATUS_FILE, {
    kind: 'no-status',
    why,
    meaning: 'the study never started (or never got to write status.json) before the instance ended.',
  });
  const status = parseStudyStatus(copy.text);
  if (!status) {
    throw controlError(
      'bad-status',
      `s3://${testbed.bucket}/${copy.key} is not a status file of the study runner`,
    );
  }
  ctx.write(`${why}.`);
  ctx.write(syncedCopyLine(testbed, copy));
  for (const line of formatStudyStatus(status, ctx.now())) ctx.write(line);
  // The instance is gone: no cost or shutdown to tell, but which study and which runs failed.
  for (const line of studyClockLines(status, { pricePerHourUsd: 0, maxLifetimeHours: 0 }, ctx.now()))
    ctx.write(line);
  if (status.checklist)
    for (const line of await checklistLines(ctx, testbed, status.checklist, false)) ctx.write(line);
}

/**
 * `lab results`: asks a running host to upload now, then downloads the stack's results prefix
 * into `outDir`, skipping files that have not changed since the last download.
 */
export async function fetchResults(ctx: ControlContext, outDir: string): Promise<void> {
  const testbed = await describeTestbed(ctx);
  const state = await instanceState(ctx, testbed.instanceId);
  const location = `s3://${testbed.bucket}/${testbed.prefix}`;
  if (state === 'running') {
    ctx.write(`asking instance ${testbed.instanceId} to upload its results to ${location} now`);
    const result = await runOnHost(ctx, testbed.instanceId, {
      comment: `lab results: upload the results of ${testbedName(testbed)}`,
      lines: renderSyncResults(),
      timeoutSeconds: HOST_TIMEOUTS.sync,
    });
    if (result.status !== 'Success') {
      // The last synced copy is still worth having; say plainly that it may be behind.
      ctx.write(
        `warning: the upload on the host failed with exit code ${result.exitCode}: ${result.stderr.trim() || '(no stderr)'}`,
      );
      ctx.write('downloading the last synced copy instead (the host uploads every 5 minutes).');
    }
  } else {
    ctx.write(`${notRunningReason(testbed.instanceId, state)}: downloading the last synced copy.`);
  }
  const summary = await downloadResults(ctx, testbed.bucket, testbed.prefix, outDir, (object, fetched) => {
    if (fetched) ctx.write(`fetched ${object.path} (${formatBytes(object.size)})`);
  });
  const total = summary.fetched.length + summary.unchanged.length;
  if (total === 0) {
    throw controlError(
      'no-results',
      `There are no results in ${location} yet: the host uploads every 5 minutes once the bootstrap has started, and the study's files appear once the runner has started (lab status ${testbedArgs(testbed)}).`,
    );
  }
  ctx.write(
    `${summary.fetched.length} file(s) fetched (${formatBytes(summary.bytesFetched)}), ${summary.unchanged.length} unchanged, in ${outDir}`,
  );
  ctx.write(`make the report: lab report ${outDir}`);
}
