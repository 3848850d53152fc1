/**
 * vLLM's Prometheus metrics and start-up log, read as the study's evidence (lab-spec 3.1, 4.3).
 * Pure: text in, numbers out. Counters count tokens, not blocks.
 */

/** One sample line of the Prometheus text exposition format. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export const PREFIX_CACHE_QUERIES = 'vllm:prefix_cache_queries_total';
export const PREFIX_CACHE_HITS = 'vllm:prefix_cache_hits_total';
export const REQUEST_SUCCESS = 'vllm:request_success_total';
export const REQUESTS_RUNNING = 'vllm:num_requests_running';
export const REQUESTS_WAITING = 'vllm:num_requests_waiting';
export const KV_CACHE_USAGE = 'vllm:kv_cache_usage_perc';

/**
 * Parses the Prometheus text format (version 0.0.4): comments and blank lines are skipped,
 * label values may hold escaped quotes, backslashes and newlines, values may be NaN or +/-Inf,
 * and an optional timestamp follows the value. A line that does not parse throws, naming it.
 */
export function parsePrometheusText(text: string): Sample[] {
  const samples: Sample[] = [];
  const lines = text.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index].trim();
    if (line === '' || line.startsWith('#')) continue;
    try {
      samples.push(parseSampleLine(line));
    } catch (error) {
      throw new Error(`metrics line ${index + 1} ("${line.slice(0, 80)}"): ${(error as Error).message}`);
    }
  }
  return samples;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;

function parseSampleLine(line: string): Sample {
  const nameMatch = NAME.exec(line);
  if (!nameMatch) throw new Error('no metric name');
  const name = nameMatch[0];
  let rest = line.slice(name.length);
  const labels: Record<string, string> = {};
  if (rest.startsWith('{')) {
    rest = rest.slice(1);
    for (;;) {
      rest = rest.trimStart();
      if (rest.startsWith('}')) {
        rest = rest.slice(1);
        break;
      }
      const labelMatch = LABEL_NAME.exec(rest);
      if (!labelMatch) throw new Error('bad label name');
      rest = rest.slice(labelMatch[0].length).trimStart();
      if (!rest.startsWith('=')) throw new Error(`label ${labelMatch[0]} has no value`);
      rest = rest.slice(1).trimStart();
      if (!rest.startsWith('"')) throw new Error(`label ${labelMatch[0]} has no quoted value`);
      rest = rest.slice(1);
      let value = '';
      let closed = false;
      let i = 0;
      for (; i < rest.length; i++) {
        const c = rest[i];
        if (c === '\\') {
          const next = rest[i + 1];
          value += next === 'n' ? '\n' : next;
          i++;
        } else if (c === '"') {
          closed = true;
          break;
        } else {
          value += c;
        }
      }
      if (!closed) throw new Error(`label ${labelMatch[0]} value is not closed`);
      labels[labelMatch[0]] = value;
      rest = rest.slice(i + 1).trimStart();
      if (rest.startsWith(',')) rest = rest.slice(1);
      else if (!rest.startsWith('}')) throw new Error('expected "," or "}" after a label');
    }
  }
  const fields = rest.trim().split(/\s+/);
  if (fields.length < 1 || fields.length > 2 || fields[0] === '') throw new Error('expected a value');
  return { name, labels, value: parseValue(fields[0]) };
}

function parseValue(text: string): number {
  switch (text) {
    case 'NaN':
      return Number.NaN;
    case '+Inf':
    case 'Inf':
      return Number.POSITIVE_INFINITY;
    case '-Inf':
      return Number.NEGATIVE_INFINITY;
  }
  const value = Number(text);
  if (text.trim() === '' || Number.isNaN(value)) throw new Error(`"${text}" is not a number`);
  return value;
}

/** What the study reads from one replica's /metrics at one moment. */
export interface VllmSnapshot {
  /** Sample lines whose name starts with `vllm:` (330 on v0.11; 0 with --disable-log-stats). */
  readonly vllmSeries: number;
  /** Counters summed over every label set (model_name, engine, ...); undefined when absent. */
  readonly prefixCacheQueries?: number;
  readonly prefixCacheHits?: number;
  /** `vllm:request_success_total` summed over `finished_reason` and every other label. */
  readonly requestSuccess?: number;
  /** Per finished_reason (stop, length, abort, ...), summed over other labels. */
  readonly requestSuccessByReason: Readonly<Record<string, number>>;
  readonly requestsRunning?: number;
  readonly requestsWaiting?: number;
  /** 0-1; the highest over label sets. */
  readonly kvCacheUsage?: number;
}

/** The study's numbers from a replica's /metrics text. */
export function vllmSnapshot(text: string): VllmSnapshot {
  const samples = parsePrometheusText(text);
  const vllm = samples.filter((s) => s.name.startsWith('vllm:'));
  const of = (name: string) => vllm.filter((s) => s.name === name);
  const total = (name: string): number | undefined => {
    const found = of(name);
    return found.length === 0 ? undefined : found.reduce((sum, s) => sum + s.value, 0);
  };
  const byReason: Record<string, number> = {};
  for (const s of of(REQUEST_SUCCESS)) {
    const reason = s.labels.finished_reason ?? '';
    byReason[reason] = (byReason[reason] ?? 0) + s.value;
  }
  const usage = of(KV_CACHE_USAGE);
  return {
    vllmSeries: vllm.length,
    prefixCacheQueries: total(PREFIX_CACHE_QUERIES),
    prefixCacheHits: total(PREFIX_CACHE_HITS),
    requestSuccess: total(REQUEST_SUCCESS),
    requestSuccessByReason: byReason,
    requestsRunning: total(REQUESTS_RUNNING),
    requestsWaiting: total(REQUESTS_WAITING),
    kvCacheUsage: usage.length === 0 ? undefined : Math.max(...usage.map((s) => s.value)),
  };
}

/** Counter deltas of one replica over a run. */
export interface CounterDeltas {
  readonly requests: number;
  readonly queriedTokens: number;
  readonly hitTokens: number;
  /** hits / queries, or null when nothing was queried. */
  readonly hitRate: number | null;
}

/**
 * after - before for the three counters of a run. Undefined when a counter is absent from either
 * snapshot or went backwards (the replica restarted during the run and its counters began at 0).
 */
export function counterDeltas(before: VllmSnapshot, after: VllmSnapshot): CounterDeltas | undefined {
  const delta = (a?: number, b?: number) => (a === undefined || b === undefined || b < a ? undefined : b - a);
  const requests = delta(before.requestSuccess, after.requestSuccess);
  const queriedTokens = delta(before.prefixCacheQueries, after.prefixCacheQueries);
  const hitTokens = delta(before.prefixCacheHits, after.prefixCacheHits);
  if (requests === undefined || queriedTokens === undefined || hitTokens === undefined) return undefined;
  return {
    requests,
    queriedTokens,
    hitTokens,
    hitRate: queriedTokens === 0 ? null : hitTokens / queriedTokens,
  };
}

const KV_CACHE_LINE = /GPU KV cache size:\s*([\d,]+)\s*tokens/;

/** The KV cache size vLLM logs at start-up (`GPU KV cache size: 163,472 tokens`); undefined if absent. */
export function kvCacheTokensFromLog(log: string): number | undefined {
  const match = KV_CACHE_LINE.exec(log);
  return match ? Number(match[1].replaceAll(',', '')) : undefined;
}
