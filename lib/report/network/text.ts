import type { CurlOutcome } from '../../network/study/model.ts';
import { type Align, MISSING, type TextTable } from '../format.ts';
import type { NetworkReportTables, RepeatSummary } from './table-rows.ts';
import { REPEAT_SPREAD_LIMIT_PERCENT } from './tables.ts';

/**
 * How the network report writes its values (docs/facts.md §N6), shared by its sections. Latencies
 * of the mesh experiments are sub-millisecond: three decimals (microseconds); programming
 * latencies one decimal; throughput whole calls per second; a missing value is an em dash.
 */

/** `0.211 ms`: the mesh experiments' latencies, to the microsecond. */
export const fineMs = (value: number | undefined): string =>
  value === undefined || !Number.isFinite(value) ? MISSING : `${value.toFixed(3)} ms`;

/** `1,183.4 ms`: programming latencies and gaps. */
export const coarseMs = (value: number | undefined): string =>
  value === undefined || !Number.isFinite(value)
    ? MISSING
    : `${value.toLocaleString('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 })} ms`;

/** `0.412 ms` below 10 ms, `1,003.6 ms` above: connect times that range from microseconds to SYN retransmits. */
export const anyMs = (value: number | undefined): string =>
  value !== undefined && value < 10 ? fineMs(value) : coarseMs(value);

/** `x3.90`, `x0.013`: a ratio to the plain arm or the baseline cell. */
export const times = (value: number | undefined): string =>
  value === undefined || !Number.isFinite(value)
    ? MISSING
    : // Two significant digits below 0.1: Cilium's x0.013 of iptables is not x0.01.
      `x${value > 0 && value < 0.1 ? value.toPrecision(2) : value.toFixed(2)}`;

/** `38,000`: calls per second, whole. */
export const qps = (value: number | undefined): string =>
  value === undefined || !Number.isFinite(value) ? MISSING : Math.round(value).toLocaleString('en-US');

/** `+-1.8%`, or `+-3.5% (over +-3%: flagged)`. */
export function spread(summary: RepeatSummary | undefined): string {
  if (!summary) return MISSING;
  if (summary.repeats < 2) return 'one repeat';
  const text = `+-${summary.spreadPercent.toFixed(1)}%`;
  return summary.spreadPercent > REPEAT_SPREAD_LIMIT_PERCENT
    ? `${text} (over +-${REPEAT_SPREAD_LIMIT_PERCENT}%: flagged)`
    : text;
}

/**
 * What a curl outcome means (docs/facts.md §N3): STRICT drops an out-of-mesh plaintext
 * connection (HTTP 000, curl exit 56, "connection reset"); an AuthorizationPolicy denial is an
 * HTTP 403 over a working connection.
 */
export function curlSymptom(outcome: CurlOutcome | null): string {
  if (outcome === null) return 'no outcome recorded';
  const codes = `HTTP ${outcome.httpCode}, curl exit ${outcome.curlExit}`;
  if (outcome.httpCode === '000') {
    return outcome.curlExit === 56 ? `connection dropped (${codes})` : `no response (${codes})`;
  }
  if (outcome.httpCode === '403') return `denied by policy (${codes})`;
  if (outcome.httpCode === '200') return `answered (${codes})`;
  return codes;
}

export const mib = (bytes: number) =>
  `${(bytes / (1024 * 1024)).toLocaleString('en-US', { maximumFractionDigits: 1 })} MiB`;
export const mibPerSecond = (bytesPerSecond: number) =>
  `${(bytesPerSecond / (1024 * 1024)).toLocaleString('en-US', { maximumFractionDigits: 1 })} MiB/s`;

export const right = (n: number): Align[] => Array.from({ length: n }, (): Align => 'right');

/** `0.900 to 0.920 ms`: the range of an arm's repeats. */
export const fineRange = (low: number, high: number): string => `${low.toFixed(3)} to ${high.toFixed(3)} ms`;

/** `+12`, `-3`, `0`: a signed whole difference. */
export function signedCount(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return MISSING;
  const text = Math.round(value).toLocaleString('en-US');
  return value > 0 ? `+${text}` : text;
}

/** `+0.011 ms`, `-0.004 ms`: a signed difference of mesh-scale latencies. */
export function signedFineMs(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return MISSING;
  const text = value.toFixed(3);
  return `${value > 0 && text !== '0.000' ? '+' : ''}${text === '-0.000' ? '0.000' : text} ms`;
}

/** `aes, vaes` of the CPU flags that matter for encryption cost, or what is missing. */
export function cryptoFlags(flags: readonly string[]): string {
  const wanted = ['aes', 'vaes'];
  return wanted.map((flag) => (flags.includes(flag) ? flag : `no ${flag}`)).join(', ');
}

export function emptyNote(rows: readonly unknown[], what: string): string[] {
  return rows.length === 0 ? [`No valid ${what}.`] : [];
}

/** The warning under a table that left invalid runs out. */
export function omitted(tables: NetworkReportTables, experiments: readonly string[]): string[] {
  const ids = tables.invalid
    .filter((r) => experiments.includes(r.experiment))
    .map((r) => `${r.cell}/${r.runId}`);
  return ids.length === 0 ? [] : [`Left out as invalid (see Invalid runs): ${[...new Set(ids)].join(', ')}.`];
}

export function table(headers: string[], align: Align[], rows: string[][]): TextTable {
  return { headers, align, rows };
}

/** What a "vs baseline" cell shows on the baseline's own row, or without a baseline. */
export function vsBaseline(
  tables: NetworkReportTables,
  cell: string,
  value: number | undefined,
  text: (v: number | undefined) => string,
): string {
  if (tables.baseline.cell === undefined) return 'no baseline';
  if (cell === tables.baseline.cell) return 'baseline';
  return value === undefined ? `no valid ${tables.baseline.cell} figure` : text(value);
}
