import { meanMs, parseFortioResult, percentileMs } from '../../network/study/fortio-result.ts';
import type { NetworkRunRecord, NetworkStudyRecord } from '../../network/study/model.ts';
import type { FortioFigures, InvalidRun } from './table-rows.ts';

/**
 * Which of a cell's run records the network report uses: per run id the last valid attempt; every
 * invalid attempt is listed with its reasons. Pure.
 */

/** A valid run and what the report read from it. */
export interface UsableRun {
  readonly record: NetworkRunRecord;
  /** Present for fortio runs. */
  readonly fortio?: FortioFigures;
}

/** What fortio's JSON says (lib/network/study/fortio-result.ts reads it). */
export function fortioFigures(raw: string): FortioFigures {
  const result = parseFortioResult(raw);
  const p50 = percentileMs(result, 50);
  const p90 = percentileMs(result, 90);
  const p99 = percentileMs(result, 99);
  return {
    meanMs: meanMs(result),
    ...(p50 === undefined ? {} : { p50Ms: p50 }),
    ...(p90 === undefined ? {} : { p90Ms: p90 }),
    ...(p99 === undefined ? {} : { p99Ms: p99 }),
    actualQps: result.ActualQPS,
  };
}

function resultProblem(record: NetworkRunRecord): string | undefined {
  if (!record.result) return 'marked valid but holds no result';
  if (record.result.kind !== record.spec.kind) {
    return `its result is of kind ${record.result.kind}, its spec of kind ${record.spec.kind}`;
  }
  return undefined;
}

/**
 * Splits a cell's records: per run id, the last valid attempt is used; every invalid attempt is
 * listed. A valid run whose result the report cannot read (a fortio file that does not parse, a
 * result of another kind than its spec) is listed as invalid with that reason rather than dropped.
 */
export function selectRuns(study: NetworkStudyRecord): { usable: UsableRun[]; invalid: InvalidRun[] } {
  const invalid: InvalidRun[] = [];
  const chosen = new Map<string, UsableRun>();
  const listInvalid = (record: NetworkRunRecord, reasons: readonly string[]) =>
    invalid.push({
      cell: study.cell,
      runId: record.id,
      experiment: record.experiment,
      title: record.title,
      ...(record.attempt === undefined ? {} : { attempt: record.attempt }),
      ...(record.spec.kind === 'service-scale' ? { services: record.spec.services } : {}),
      reasons,
    });
  for (const record of study.runs) {
    if (!record.valid) {
      listInvalid(record, record.invalidReasons.length > 0 ? record.invalidReasons : ['marked invalid']);
      continue;
    }
    const problem = resultProblem(record);
    if (problem) {
      listInvalid(record, [problem]);
      continue;
    }
    let fortio: FortioFigures | undefined;
    if (record.result?.kind === 'fortio') {
      try {
        fortio = fortioFigures(record.result.raw);
      } catch (error) {
        listInvalid(record, [`the report cannot read its fortio result: ${(error as Error).message}`]);
        continue;
      }
    }
    chosen.set(record.id, { record, ...(fortio ? { fortio } : {}) });
  }
  // Record order is execution order; a map keeps each id's first insertion position.
  const usable = study.runs.flatMap((r) => {
    const run = chosen.get(r.id);
    return run && run.record === r ? [run] : [];
  });
  return { usable, invalid };
}
