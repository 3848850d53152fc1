import { type FortioResult, nonOkCodes, parseFortioResult } from '../../network/study/fortio-result.ts';
import type { NetworkRun, NetworkRunRecord } from '../../network/study/model.ts';

/**
 * The runner's judgment of a record before it is written: the runner's own findings (Job
 * outcome, missing result file, preconditions not met, restore failures) plus the validity checks
 * of network-lab-spec 5. Local checks until the study's `judgeNetworkRun` replaces them.
 */
export type RecordDraft = Omit<NetworkRunRecord, 'valid' | 'invalidReasons' | 'flags'>;

export interface Judgment {
  readonly valid: boolean;
  readonly invalidReasons: string[];
  readonly flags: string[];
}

const BUCKET_POSITIONS = [0.5, 0.9, 0.99];

/** The result parses; every call answered OK; no percentile on a 1 ms bucket position (fortio's default `-r 0.001`). */
function fortioReasons(raw: string): string[] {
  let result: FortioResult;
  try {
    result = parseFortioResult(raw);
  } catch (error) {
    return [(error as Error).message];
  }
  const reasons: string[] = [];
  const bad = Object.entries(nonOkCodes(result));
  if (bad.length > 0) reasons.push(`fortio calls not OK: ${bad.map(([c, n]) => `${c} x${n}`).join(', ')}`);
  const onBuckets = result.DurationHistogram.Percentiles.filter((p) =>
    BUCKET_POSITIONS.some((pos) => Math.abs(p.Value / 0.001 - pos) < 1e-9),
  );
  if (onBuckets.length > 0) {
    reasons.push(
      `percentiles on 1 ms bucket positions (${onBuckets.map((p) => `p${p.Percentile}=${p.Value}s`).join(', ')}): the histogram resolution is too coarse`,
    );
  }
  return reasons;
}

/** The runner's findings and the minimal validity checks of the record. */
export function judgeDraft(_run: NetworkRun, draft: RecordDraft, runnerReasons: readonly string[]): Judgment {
  const reasons = [...runnerReasons];
  const result = draft.result;
  if (result?.kind === 'fortio') reasons.push(...fortioReasons(result.raw));
  if (result?.kind === 'service-scale') {
    const q = result.scale.prober?.quantization;
    if (q?.verdict === 'clustered')
      reasons.push(`E9 prober samples cluster on its attempt timeout: ${q.reason}`);
  }
  return { valid: reasons.length === 0, invalidReasons: reasons, flags: [] };
}
