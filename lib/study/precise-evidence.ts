/**
 * Evidence that llm-d's precise prefix scorer really matched (issue 24 item 4). Index look-ups and
 * admissions above zero only show that the index was fed and asked; they do not show that the
 * scheduler's block hashes ever equalled vLLM's. What does: the scorer's own "Got pod scores" line
 * (llm-d-inference-scheduler pkg/plugins/scorer/precise_prefix_cache.go, PrecisePrefixCacheScorer.Score,
 * logged at DEBUG verbosity, GAIE logutil.DEBUG = 4, so the EPP needs `-v=4`): its `scores` map holds
 * only pods for which the look-up found blocks (llm-d-kv-cache-manager LongestPrefixScorer leaves the
 * others out), so `scores_count` above zero is a look-up that found blocks for a pod.
 * UNCONFIRMED that v0.3.2 logs the line under this name: with no such line at all the verdict is
 * "not observable", never "matched".
 */

export interface PreciseScorerEvidence {
  /** "Got pod scores" lines: look-ups the scorer logged. */
  readonly lookups: number;
  /** Of them, look-ups that found blocks for at least one pod. */
  readonly lookupsWithBlocks: number;
  /** Per pod address, look-ups that found blocks on it. */
  readonly podsWithBlocks: Readonly<Record<string, number>>;
  readonly verdict: 'matched' | 'never-matched' | 'not-observable';
  readonly message: string;
}

const SCORES_LINE = 'Got pod scores';

/** One logged look-up: its pod scores (empty when it found no block). */
function parseLookup(line: string): Record<string, number> | undefined {
  if (!line.includes(SCORES_LINE)) return undefined;
  const start = line.indexOf('{');
  if (start >= 0) {
    try {
      const entry = JSON.parse(line.slice(start)) as {
        msg?: string;
        scores?: unknown;
        scores_count?: unknown;
      };
      if (entry.msg === SCORES_LINE) {
        const scores =
          entry.scores && typeof entry.scores === 'object' ? (entry.scores as Record<string, unknown>) : {};
        return Object.fromEntries(
          Object.entries(scores).filter(([, v]) => typeof v === 'number' && v > 0) as Array<[string, number]>,
        );
      }
    } catch {
      // Not JSON: the console encoder; read the key-value pairs below.
    }
  }
  const count = /"?scores_count"?\s*[:=]\s*(\d+)/.exec(line);
  if (!count) return {};
  const n = Number(count[1]);
  const pods: Record<string, number> = {};
  // Console encoding prints the map as {"10.42.0.7":128,...} or map[10.42.0.7:128 ...].
  for (const m of line.matchAll(/"?(\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?)"?\s*[:=]\s*(\d+(?:\.\d+)?)/g)) {
    const score = Number(m[2]);
    if (score > 0) pods[m[1] as string] = score;
  }
  return n > 0 && Object.keys(pods).length === 0 ? { unknown: n } : pods;
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
      message: `no "${SCORES_LINE}" line in the EPP log: run the EPP with -v=4 (DEBUG) to see whether the precise scorer's look-ups ever found blocks`,
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

/** The narrow read the runner needs: the EPP container's log since the run started. */
export interface EppLogReader {
  readEppLog(sinceIso: string): Promise<string>;
}

/**
 * Collects and judges the evidence of one llm-d run. To be wired into the runner after an llm-d
 * prefix run's benchmark Job finished, beside where the EPP-family prompt evidence is read
 * (lib/runner, not changed here).
 */
export async function collectPreciseScorerEvidence(
  reader: EppLogReader,
  runStartedAt: string,
): Promise<PreciseScorerEvidence> {
  return preciseScorerEvidence(await reader.readEppLog(runStartedAt));
}
