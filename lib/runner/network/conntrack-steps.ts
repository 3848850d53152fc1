import type {
  ConntrackRunSpec,
  NetworkJobOutcome,
  NetworkRun,
  NetworkRunRecord,
  NetworkStudyRecord,
  PodMeshEvidence,
} from '../../network/study/model.ts';
import { rethrowOutage } from '../call-policy.ts';
import { asCleanup } from '../stop-signal.ts';
import { CONNTRACK_READ_SCRIPT, conntrackSetScript, countOf, keyValues } from './host-output.ts';
import { STUDY_STEP } from './job-driver.ts';
import { conntrackDriverJob, OUTPUT_FILES } from './jobs.ts';
import { networkJobName } from './layout.ts';
import { type KindOutcome, meshEvidence, type StepContext } from './runner-context.ts';

/**
 * The host default to put back at a runner's start, when a study's last record shows E10 begun and
 * not ended: its host default recorded (the first E10 step reads it before lowering anything) and
 * fewer E10 records than the plan's steps, or a step whose limit did not read back as the default.
 * `plannedSteps` undefined (another study than the one resumed, whose plan may differ: a smoke
 * study's, an older configuration's): begun is enough, and the limit is read to be sure.
 * Undefined: E10 never began, or every step ended with the default restored.
 */
export function conntrackToRestore(
  study: Pick<NetworkStudyRecord, 'conntrackHostDefault'> | undefined,
  records: readonly NetworkRunRecord[],
  plannedSteps: number | undefined,
): number | undefined {
  const hostDefault = study?.conntrackHostDefault;
  if (hostDefault === undefined) return undefined;
  const steps = records.flatMap((r) => (r.result?.kind === 'conntrack' ? [r.result.conntrack] : []));
  const unfinished =
    plannedSteps === undefined ||
    steps.length < plannedSteps ||
    steps.some((step) => step.limitAfterRestore !== hostDefault);
  return unfinished ? hostDefault : undefined;
}

/** E10 (conntrack table full): set the limit, drive the connections, restore the limit. */
export class ConntrackSteps {
  /** The host's own nf_conntrack_max, read before the study's first E10 step (or from its record). */
  conntrackDefault: number | undefined;

  /** `recordDefault` keeps the host default in the study record before any limit is lowered. */
  constructor(
    private readonly ctx: StepContext,
    private readonly recordDefault: (limit: number) => Promise<void>,
  ) {}

  /**
   * The host default: recorded earlier in the study (or by this step's baseline read, which reads
   * the limit too), else read now, before anything is written.
   */
  private async hostDefault(run: NetworkRun): Promise<number> {
    if (this.conntrackDefault !== undefined) return this.conntrackDefault;
    const values = keyValues(
      await this.ctx.jobs.hostOutput(`ct-default-${run.id}`, run.id, CONNTRACK_READ_SCRIPT),
    );
    return this.adoptDefault(run, countOf(values, 'max', 'the conntrack read Job'));
  }

  /** Keeps the host's own limit, read before the study lowered anything, in the study record. */
  private async adoptDefault(run: NetworkRun, limit: number): Promise<number> {
    this.conntrackDefault = limit;
    await this.recordDefault(limit);
    await this.ctx.say(`${run.id}: the host's nf_conntrack_max is ${limit}; every E10 step restores it`);
    return limit;
  }

  /** E10: set the limit, drive the connections, and ALWAYS restore the limit. */
  async conntrackRun(run: NetworkRun, spec: ConntrackRunSpec): Promise<KindOutcome> {
    const reasons: string[] = [];
    let limitBefore: number;
    let limit: number;
    let baseline: number;
    await this.ctx.phase('setting the conntrack limit');
    let hostDefault: number;
    try {
      hostDefault = await this.hostDefault(run);
    } catch (error) {
      rethrowOutage(error);
      return {
        job: 'failed',
        pods: [],
        reasons: [
          `the host's nf_conntrack_max not read, so no limit was lowered: ${(error as Error).message}`,
        ],
      };
    }
    try {
      const script = spec.limit === 'default' ? CONNTRACK_READ_SCRIPT : conntrackSetScript(spec.limit);
      const values = keyValues(await this.ctx.jobs.hostOutput(`ct-set-${run.id}`, run.id, script));
      limitBefore = countOf(values, spec.limit === 'default' ? 'max' : 'before', 'the conntrack Job');
      limit = countOf(values, 'max', 'the conntrack Job');
      baseline = countOf(values, 'count', 'the conntrack Job');
    } catch (error) {
      // The limit may have been written before the read failed: put back the host's own limit.
      const restore = await this.restoreLimit(run, hostDefault);
      rethrowOutage(error);
      return {
        job: 'failed',
        pods: [],
        reasons: [`conntrack limit not set: ${(error as Error).message}`, ...restore.reasons],
      };
    }
    if (spec.limit !== 'default' && limit !== spec.limit)
      reasons.push(`nf_conntrack_max reads ${limit} after writing ${spec.limit}`);
    let driver = null;
    let job: NetworkJobOutcome = 'failed';
    let pods: PodMeshEvidence[] = [];
    let restored: number | null = null;
    try {
      await this.ctx.phase('driving connections');
      const name = networkJobName(run.id, 'driver');
      const done = await this.ctx.jobs.runJob(
        run,
        conntrackDriverJob(this.ctx.deps.jobs, name, run.id, spec.connections, spec.connectTimeoutSeconds),
        OUTPUT_FILES.conntrackDriver,
      );
      job = done.outcome;
      pods = done.pods.map(meshEvidence);
      if (done.text === undefined) reasons.push(`job/${name} ${done.outcome} and left no result file`);
      else driver = JSON.parse(done.text);
    } catch (error) {
      rethrowOutage(error);
      reasons.push(`conntrack driver: ${(error as Error).message}`);
    } finally {
      await this.ctx.phase('restoring the conntrack limit');
      // The default step wrote nothing; it still writes the default back if it found another value.
      const write = spec.limit === 'default' && limitBefore === hostDefault ? undefined : hostDefault;
      const restore = await this.restoreLimit(run, write);
      restored = restore.limitAfterRestore;
      reasons.push(...restore.reasons);
    }
    return {
      job,
      result: {
        kind: 'conntrack',
        conntrack: {
          limitBefore,
          limit,
          baseline,
          limitAfterRestore: restored,
          restoredTo: hostDefault,
          driver,
        },
      },
      pods,
      reasons,
    };
  }

  /**
   * Writes `limit` back (the host default; undefined: only read it back) and reads
   * it; tried twice, so one failed Job does not leave the host with a small table.
   */
  restoreLimit(
    run: NetworkRun,
    limit: number | undefined,
  ): Promise<{ limitAfterRestore: number | null; reasons: string[] }> {
    // Also when the runner was told to stop: a lowered limit must not outlive the step.
    return asCleanup(this.ctx.deps.stop, () => this.restoreLimitNow(run, limit));
  }

  private async restoreLimitNow(
    run: NetworkRun,
    limit: number | undefined,
  ): Promise<{ limitAfterRestore: number | null; reasons: string[] }> {
    let last = '';
    for (let attempt = 1; attempt <= 2; attempt++) {
      try {
        const script = limit === undefined ? CONNTRACK_READ_SCRIPT : conntrackSetScript(limit);
        const values = keyValues(await this.ctx.jobs.hostOutput(`ct-restore-${run.id}`, run.id, script));
        const after = countOf(values, 'max', 'the conntrack restore Job');
        if (limit !== undefined && after !== limit) {
          last = `nf_conntrack_max reads ${after} after restoring ${limit}`;
          continue;
        }
        await this.ctx.say(`${run.id}: nf_conntrack_max is ${after} after the step`);
        return { limitAfterRestore: after, reasons: [] };
      } catch (error) {
        rethrowOutage(error);
        last = (error as Error).message;
        await this.ctx.say(`${run.id}: restoring the conntrack limit failed (try ${attempt}/2): ${last}`);
      }
    }
    return { limitAfterRestore: null, reasons: [`conntrack limit not restored: ${last}`] };
  }

  /**
   * A runner stopped mid-E10 (`previous`: this study's records, or the cell's last study before a
   * new one) may have left a lowered conntrack limit: the host default goes back before any
   * measurement. What was found, for study.json, or undefined when nothing needed restoring.
   */
  async restoreAfterStop(
    previous: { study: NetworkStudyRecord; records: readonly NetworkRunRecord[] } | undefined,
    plannedSteps: number | undefined,
    now: Date,
  ): Promise<NetworkStudyRecord['conntrackRestoredAtStart']> {
    const toRestore = conntrackToRestore(previous?.study, previous?.records ?? [], plannedSteps);
    if (toRestore === undefined) return undefined;
    const found = await this.restoreAtStart(toRestore);
    return found ? { ...found, at: now.toISOString() } : undefined;
  }

  /**
   * At the runner's start, before any measurement: a runner killed mid-E10 may have left the host
   * with a lowered nf_conntrack_max. Reads it and writes `hostDefault` back when it differs; what
   * was found is returned for the study record. A limit that will not go back stops the study.
   */
  async restoreAtStart(hostDefault: number): Promise<{ found: number; restoredTo: number } | undefined> {
    await this.ctx.phase('checking the conntrack limit a stopped E10 step may have left');
    const read = keyValues(
      await this.ctx.jobs.hostOutput('ct-start-read', STUDY_STEP, CONNTRACK_READ_SCRIPT),
    );
    const found = countOf(read, 'max', 'the conntrack read Job');
    if (found === hostDefault) {
      await this.ctx.say(`E10 was unfinished; nf_conntrack_max is the host default ${hostDefault}`);
      return undefined;
    }
    const written = keyValues(
      await this.ctx.jobs.hostOutput('ct-start-restore', STUDY_STEP, conntrackSetScript(hostDefault)),
    );
    const after = countOf(written, 'max', 'the conntrack restore Job');
    if (after !== hostDefault)
      throw new Error(
        `nf_conntrack_max reads ${after} after restoring the host default ${hostDefault} (a stopped E10 step left ${found}): no measurement runs on a lowered conntrack table`,
      );
    await this.ctx.say(
      `E10 was unfinished: nf_conntrack_max was ${found}, restored to the host default ${hostDefault} before any measurement`,
    );
    return { found, restoredTo: hostDefault };
  }

  /**
   * Waits (each poll a short host Job) until the conntrack table holds fewer than `max` entries.
   * The read prints the limit too: before the study's first E10 step lowered anything, that is the
   * host default, kept from the first poll so the step needs no Job of its own to read it.
   */
  async conntrackBaseline(run: NetworkRun, max: number): Promise<string | undefined> {
    let poll = 0;
    return this.ctx.jobs.waitFor(`fewer than ${max} conntrack entries`, async () => {
      const values = keyValues(
        await this.ctx.jobs.hostOutput(`ct-read-${run.id}-${++poll}`, run.id, CONNTRACK_READ_SCRIPT),
      );
      if (this.conntrackDefault === undefined)
        await this.adoptDefault(run, countOf(values, 'max', 'the conntrack read Job'));
      const count = countOf(values, 'count', 'the conntrack read Job');
      return count < max ? undefined : `${count} entries`;
    });
  }
}
