/**
 * Evidence that llm-d's precise prefix scorer really matched. Index look-ups and admissions above
 * zero only show that the index was fed and asked; they do not show that the scheduler's block
 * hashes ever equalled vLLM's. What does: the scorer's own "Got pod scores" line, read at
 * llm-d-inference-scheduler v0.3.2 (docs/facts.md §3.7): `PrecisePrefixCacheScorer.Score` in
 * pkg/plugins/scorer/precise_prefix_cache.go logs it through
 * `log.FromContext(ctx).V(logutil.DEBUG)` with the key `scores`, the map
 * `kvcache.Indexer.GetPodScores` returned. GAIE v1.0.0's `logutil.DEBUG` is 4
 * (pkg/epp/util/logging/logging_const.go) and its runner maps `-v` to the zap level `-v`
 * (cmd/epp/runner/runner.go, initLogging), so the line appears only with `--v 4` or more. In
 * llm-d-kv-cache-manager v0.3.2, `LongestPrefixScorer.Score` (pkg/kvcache/kvblock_scorer.go) puts a
 * pod in the map only when the index holds the prompt's first block key for it, and
 * `GetPodScores` returns nil for a prompt shorter than one block: a non-empty map is a look-up that
 * found blocks on a pod.
 */

export type PreciseScorerVerdict = 'matched' | 'never-matched' | 'not-observable';

export interface PreciseScorerEvidence {
  /** "Got pod scores" lines: look-ups the scorer logged. */
  readonly lookups: number;
  /** Of them, look-ups that found blocks for at least one pod. */
  readonly lookupsWithBlocks: number;
  /** Per pod (the identifier of the replica's KV-event topic), look-ups that found blocks on it. */
  readonly podsWithBlocks: Readonly<Record<string, number>>;
  readonly verdict: PreciseScorerVerdict;
  readonly message: string;
}

/** The message of the scorer's debug line (llm-d-inference-scheduler v0.3.2). */
export const SCORES_LINE = 'Got pod scores';
/** The EPP verbosity at which the line is logged: GAIE v1.0.0 `logutil.DEBUG`. */
export const SCORES_LINE_VERBOSITY = 4;

/** The pods of a logged `scores` value that the look-up found blocks on. */
function podsOf(scores: unknown): Record<string, number> {
  if (!scores || typeof scores !== 'object') return {};
  return Object.fromEntries(
    Object.entries(scores as Record<string, unknown>).filter(
      ([, v]) => typeof v === 'number' && v > 0,
    ) as Array<[string, number]>,
  );
}

/** The first JSON object in `text` from `start` on, if one parses. */
function objectFrom(text: string, start: number): Record<string, unknown> | undefined {
  const open = text.indexOf('{', start);
  if (open < 0) return undefined;
  try {
    const value = JSON.parse(text.slice(open)) as unknown;
    return value && typeof value === 'object' ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * One logged look-up: its pod scores (empty when it found no block), or undefined for any other
 * line. The EPP runs with `--zap-encoder json` (one object per line, `msg` and `scores` keys); the
 * console encoder prints the message, then the key-value pairs as one JSON object.
 */
function parseLookup(line: string): Record<string, number> | undefined {
  const at = line.indexOf(SCORES_LINE);
  if (at < 0) return undefined;
  const whole = line.trimStart().startsWith('{') ? objectFrom(line, 0) : undefined;
  if (whole) return whole.msg === SCORES_LINE ? podsOf(whole.scores) : undefined;
  const fields = objectFrom(line, at + SCORES_LINE.length);
  return podsOf(fields?.scores);
}

/** Judges an llm-d EPP log of one run. */
export function preciseScorerEvidence(eppLog: string): PreciseScorerEvidence {
  let lookups = 0;
  let lookupsWithBlocks = 0;
  const podsWithBlocks: Record<string, number> = {};
  for (const line of eppLog.split('\n')) {
    const pods = parseLookup(line);
    if (pods === undefined) continue;
    lookups++;
    const names = Object.keys(pods);
    if (names.length > 0) lookupsWithBlocks++;
    for (const pod of names) podsWithBlocks[pod] = (podsWithBlocks[pod] ?? 0) + 1;
  }
  if (lookups === 0) {
    return {
      lookups,
      lookupsWithBlocks,
      podsWithBlocks,
      verdict: 'not-observable',
      message: `no "${SCORES_LINE}" line in the EPP log: the EPP logs it at --v ${SCORES_LINE_VERBOSITY} or more (docs/facts.md §3.7), so whether the precise scorer's look-ups ever found blocks is unknown`,
    };
  }
  if (lookupsWithBlocks === 0) {
    return {
      lookups,
      lookupsWithBlocks,
      podsWithBlocks,
      verdict: 'never-matched',
      message: `${lookups} look-up(s), none found a block on any pod: the scorer's block hashes never equalled the replicas' (block size, hash seed, hash algorithm or the KV-event topic's model name differ)`,
    };
  }
  return {
    lookups,
    lookupsWithBlocks,
    podsWithBlocks,
    verdict: 'matched',
    message: `${lookupsWithBlocks} of ${lookups} look-up(s) found blocks (${Object.entries(podsWithBlocks)
      .map(([pod, n]) => `${pod}: ${n}`)
      .join(', ')})`,
  };
}

/** A run whose scorer never matched measured a prefix-blind llm-d: it is invalid. */
export function preciseScorerReasons(evidence: PreciseScorerEvidence | undefined): string[] {
  if (evidence?.verdict !== 'never-matched') return [];
  return [`llm-d's precise scorer never matched a prefix: ${evidence.message}`];
}

/** Evidence that could not be had is recorded as a warning, never taken as a match. */
export function preciseScorerWarnings(evidence: PreciseScorerEvidence | undefined): string[] {
  if (evidence?.verdict !== 'not-observable') return [];
  return [`llm-d's precise scorer: ${evidence.message}`];
}

/** The narrow read the runner needs: the EPP container's log since the run's load started. */
export interface EppLogReader {
  readEppLog(sinceIso: string): Promise<string>;
}

/** Collects and judges the evidence of one llm-d run. */
export async function collectPreciseScorerEvidence(
  reader: EppLogReader,
  runStartedAt: string,
): Promise<PreciseScorerEvidence> {
  return preciseScorerEvidence(await reader.readEppLog(runStartedAt));
}
