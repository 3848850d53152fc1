/**
 * vLLM's Prometheus metrics and start-up log, read as the study's evidence (docs/facts.md §3.1, 4.3).
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

/** True when a replica has no request running or waiting; undefined when a gauge is absent. */
export function replicaIdle(snapshot: VllmSnapshot): boolean | undefined {
  const { requestsRunning: running, requestsWaiting: waiting } = snapshot;
  if (running === undefined || waiting === undefined) return undefined;
  return running === 0 && waiting === 0;
}

// ---- The reset in vLLM's log ---------------------------------------------------------------

/*
 * POST /reset_prefix_cache (vllm/entrypoints/openai/api_server.py, registered only with
 * VLLM_SERVER_DEV_MODE=1) logs "Resetting prefix cache with specific ...", awaits the engine and
 * answers 200 whatever happened: its docstring says it does not check that the reset succeeded.
 * The engine core's reset_prefix_cache calls Scheduler.reset_prefix_cache ->
 * KVCacheManager.reset_prefix_cache -> BlockPool.reset_prefix_cache (vllm/v1/core/block_pool.py),
 * whose boolean result the API server drops. BlockPool.reset_prefix_cache refuses while any
 * block other than the null block is in use, logging a WARNING, else clears the hashes and logs
 * an INFO line. The two messages below are that function's; they read the same in the v1
 * block_pool.py of releases before and after v0.11.0 (and in v0's prefix-caching allocator).
 */

/** BlockPool.reset_prefix_cache's INFO line after it cleared every block hash. */
export const RESET_SUCCEEDED_MESSAGE = 'Successfully reset prefix cache';
/** BlockPool.reset_prefix_cache's WARNING when requests still hold blocks (the reset did not happen). */
export const RESET_REFUSED_MESSAGE = 'Failed to reset prefix cache because some blocks';

/** How often a replica's log says a prefix-cache reset succeeded or was refused. */
export interface ResetLogCounts {
  readonly succeeded: number;
  readonly refused: number;
  /** The last refusal line, trimmed (it names the blocks still in use). */
  readonly lastRefusal?: string;
}

/** Counts the reset messages of BlockPool.reset_prefix_cache in a replica's log. */
export function resetLogCounts(log: string): ResetLogCounts {
  let succeeded = 0;
  let refused = 0;
  let lastRefusal: string | undefined;
  for (const line of log.split('\n')) {
    if (line.includes(RESET_SUCCEEDED_MESSAGE)) succeeded++;
    else if (line.includes(RESET_REFUSED_MESSAGE)) {
      refused++;
      lastRefusal = line.trim();
    }
  }
  return { succeeded, refused, ...(lastRefusal !== undefined ? { lastRefusal } : {}) };
}

// ---- The EPP's own metrics -----------------------------------------------------------------

/**
 * GAIE v1.0.1 (pkg/epp/metrics/metrics.go, `PrefixCacheSize`): subsystem `inference_extension`,
 * name `prefix_indexer_size`, a gauge the prefix-cache-scorer's indexer sets every second to its
 * number of entries (pkg/epp/scheduling/framework/plugins/multi/prefix/indexer.go,
 * `ReportLRUSize`). A prompt shorter than one block (an empty one included) adds no entry
 * (plugin.go, `hashPrompt`), so the gauge stays 0 while the EPP cannot see prompts.
 */
export const PREFIX_INDEXER_SIZE = 'inference_extension_prefix_indexer_size';
/**
 * llm-d-kv-cache-manager v0.3.2 (pkg/kvcache/metrics/collector.go): counters of the KV-block index
 * behind llm-d's precise-prefix-cache-scorer. `lookup_requests_total` grows only when a prompt was
 * tokenized into at least one block key (pkg/kvcache/indexer.go, `GetPodScores` returns before
 * the lookup otherwise); `admissions_total` grows with the blocks the replicas' KV events add.
 * Both exist only when `indexerConfig.kvBlockIndexConfig.enableMetrics` is true
 * (pkg/kvcache/kvblock/index.go, `NewIndex`). Its `lookup_hits_total` is never incremented in
 * v0.3.2 (instrumented_index.go), so it is no evidence.
 */
export const KV_INDEX_LOOKUPS = 'kvcache_index_lookup_requests_total';
export const KV_INDEX_ADMISSIONS = 'kvcache_index_admissions_total';

/** What the study reads from an EPP's /metrics; each value undefined when the series is absent. */
export interface EppSnapshot {
  readonly prefixIndexerSize?: number;
  readonly kvIndexLookups?: number;
  readonly kvIndexAdmissions?: number;
}

/** The prompt-visibility evidence in an EPP's /metrics text. */
export function eppSnapshot(text: string): EppSnapshot {
  const samples = parsePrometheusText(text);
  const total = (name: string): number | undefined => {
    const found = samples.filter((s) => s.name === name);
    return found.length === 0 ? undefined : found.reduce((sum, s) => sum + s.value, 0);
  };
  return {
    prefixIndexerSize: total(PREFIX_INDEXER_SIZE),
    kvIndexLookups: total(KV_INDEX_LOOKUPS),
    kvIndexAdmissions: total(KV_INDEX_ADMISSIONS),
  };
}
