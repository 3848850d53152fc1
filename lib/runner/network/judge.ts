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

/** fortio's percentiles as in its JSON (`DurationHistogram.Percentiles`, values in seconds). */
interface FortioJson {
  RetCodes?: Record<string, number>;
  DurationHistogram?: { Percentiles?: { Percentile: number; Value: number }[] };
}

const BUCKET_POSITIONS = [0.5, 0.9, 0.99];

/** Percentiles sitting exactly on 0.5/0.9/0.99 of a 1 ms bucket: fortio's default `-r 0.001` at work. */
function bucketArtifacts(raw: string): string[] {
  let parsed: FortioJson;
  try {
    parsed = JSON.parse(raw) as FortioJson;
  } catch (error) {
    return [`fortio result does not parse: ${(error as Error).message}`];
  }
  const reasons: string[] = [];
  const codes = Object.entries(parsed.RetCodes ?? {}).filter(([code]) => code !== '200' && code !== 'SERVING');
  if (codes.length > 0) reasons.push(`fortio RetCodes other than 200: ${codes.map(([c, n]) => `${c} x${n}`).join(', ')}`);
  const onBuckets = (parsed.DurationHistogram?.Percentiles ?? []).filter((p) =>
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
  if (result?.kind === 'fortio') reasons.push(...bucketArtifacts(result.raw));
  if (result?.kind === 'service-scale') {
    const q = result.scale.prober?.quantization;
    if (q?.verdict === 'clustered') reasons.push(`E9 prober samples cluster on its attempt timeout: ${q.reason}`);
    if (result.scale.newConnection !== undefined) reasons.push(...bucketArtifacts(result.scale.newConnection));
  }
  return { valid: reasons.length === 0, invalidReasons: reasons, flags: [] };
}
