import type { ConntrackResult, NetworkStudyRecord, ServiceScaleResult } from '../../network/study/model.ts';
import { ENTRY_MODELS } from '../../network/study/planner.ts';
import { fortioFigures, type UsableRun } from './runs.ts';
import type { ConntrackRow, FortioFigures, ScaleRow } from './table-rows.ts';

/** The network report's E9 (Services at scale) and E10 (conntrack) rows of one cell. Pure. */

/** The plan's id of a step's new-connection run (lib/network/study/plan.ts `serviceScaleRuns`). */
export const newConnectionRunId = (services: number): string => `e9-new-connection-${services}`;

/** A step may carry its new-connection run's fortio JSON itself (`ServiceScaleResult.newConnection`). */
function stepNewConnection(raw: string | undefined): FortioFigures | undefined {
  if (raw === undefined) return undefined;
  try {
    return fortioFigures(raw);
  } catch {
    // The step's judgment read this file; if it cannot be read here, the column stays empty.
    return undefined;
  }
}

/** Attempts per sample (median) and the longest first-attempt delay, from the samples. */
function methodColumns(
  scale: ServiceScaleResult,
): Pick<ScaleRow, 'attemptsPerSample' | 'firstAttemptDelayMaxMs'> {
  const samples = (scale.prober?.samples ?? []).filter(
    (s) => s.connected && s.attemptsAfterStart !== undefined,
  );
  if (samples.length === 0) return {};
  const attempts = samples.map((s) => s.attemptsAfterStart as number).sort((a, b) => a - b);
  return {
    attemptsPerSample: attempts[Math.floor((attempts.length - 1) / 2)],
    firstAttemptDelayMaxMs: Math.max(...samples.map((s) => s.firstAttemptAfterMs)),
  };
}

/**
 * One row per valid E9 step, with the entries each Service added (measured against the cell's
 * own valid 0-Service step, and predicted from the pinned sources for the step's backends) and
 * the programming median against that 0-Service step.
 */
export function scaleRows(study: NetworkStudyRecord, usable: readonly UsableRun[]): ScaleRow[] {
  const byId = new Map(usable.map((u) => [u.record.id, u]));
  const steps = usable.flatMap(({ record }) =>
    record.spec.kind === 'service-scale' && record.result?.kind === 'service-scale'
      ? [{ record, spec: record.spec, scale: record.result.scale }]
      : [],
  );
  const zero = steps.find((s) => s.spec.services === 0);
  const zeroMedian = zero?.scale.prober?.latency?.p50Ms;
  const model = ENTRY_MODELS[study.datapath];
  return steps.map(({ spec, scale }): ScaleRow => {
    const latency = scale.prober?.latency ?? null;
    const newConnection =
      byId.get(newConnectionRunId(spec.services))?.fortio ?? stepNewConnection(scale.newConnection);
    const perService =
      zero && spec.services > 0 ? (scale.entries - zero.scale.entries) / spec.services : undefined;
    const vsZero =
      latency && zeroMedian !== undefined && zeroMedian > 0 && spec.services > 0
        ? latency.p50Ms / zeroMedian
        : undefined;
    return {
      cell: study.cell,
      datapath: study.datapath,
      services: spec.services,
      servicesReady: scale.servicesReady,
      entries: scale.entries,
      entriesCommand: scale.entriesCommand,
      ...(scale.lbMapFull === undefined ? {} : { lbMapFull: scale.lbMapFull }),
      ...(latency ? { programmingMedianMs: latency.p50Ms, programmingP90Ms: latency.p90Ms } : {}),
      ...methodColumns(scale),
      samplesConnected: scale.prober?.connected ?? 0,
      samplesFailed: scale.prober?.failed ?? 0,
      attemptTimeoutMs: spec.attemptTimeoutMs,
      ...(newConnection ? { newConnection } : {}),
      ...(perService === undefined ? {} : { entriesPerService: perService }),
      predictedPerService: {
        entries: model.perService(spec.backendsPerService),
        formula: model.formula,
        basis: model.basis,
        backendsPerService: spec.backendsPerService,
      },
      ...(vsZero === undefined ? {} : { programmingVsZero: vsZero }),
    };
  });
}

/** One row per valid E10 step: what succeeded against what the limit allows, and why the rest failed. */
export function conntrackRows(study: NetworkStudyRecord, usable: readonly UsableRun[]): ConntrackRow[] {
  return usable.flatMap(({ record }) => {
    if (record.spec.kind !== 'conntrack' || record.result?.kind !== 'conntrack') return [];
    const c: ConntrackResult = record.result.conntrack;
    const driver = c.driver;
    return [
      {
        cell: study.cell,
        datapath: study.datapath,
        requestedLimit: record.spec.limit,
        limit: c.limit,
        baseline: c.baseline,
        connections: record.spec.connections,
        ...(driver
          ? {
              succeeded: driver.succeeded,
              failed: driver.failed,
              failures: driver.failures,
              droppedDuringHold: driver.droppedDuringHold,
            }
          : {}),
        expectedSuccesses: Math.max(0, Math.min(record.spec.connections, c.limit - c.baseline)),
        ...(driver?.connect
          ? { connectP99Ms: driver.connect.p99Ms, connectMaxMs: driver.connect.maxMs }
          : {}),
        limitBefore: c.limitBefore,
        limitAfterRestore: c.limitAfterRestore,
        ...(c.restoredTo === undefined ? {} : { restoredTo: c.restoredTo }),
      },
    ];
  });
}
