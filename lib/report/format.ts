import type { Estimate } from '../study/arm-predictions.ts';
import type {
  ArmRow,
  BoundRow,
  Comparison,
  InvalidRun,
  PredictionCheck,
  ReportTables,
  Shortfall,
} from './tables.ts';

/**
 * The report's tables as text cells, shared by the Markdown and HTML renderers. Numbers get one
 * decimal (percentages, milliseconds, points), throughput is whole tokens per second with
 * thousands separators, a missing value is an em dash.
 */

export const MISSING = '—';

export type Align = 'left' | 'right';

export interface TextTable {
  readonly headers: readonly string[];
  readonly align: readonly Align[];
  readonly rows: readonly (readonly string[])[];
}

export interface ReportSection {
  /** Stable anchor: `arms`, `bounds`, `sharegpt`, `sweep`, `left-on-the-table`, `invalid`, `metadata`. */
  readonly id: string;
  readonly title: string;
  readonly intro: string;
  /** Short lines shown as a list under the intro (the network report's headline answers). */
  readonly items?: readonly string[];
  readonly table?: TextTable;
  /** Lines after the table that explain it (how a figure is computed, why the table is empty): neutral. */
  readonly notes: readonly string[];
  /**
   * Lines after the notes that a reader must not miss (runs left out as invalid, a finding, a
   * figure within its noise): shown in their own colour and marked "Warning:" in both formats.
   */
  readonly warnings?: readonly string[];
}

export const percent = (fraction: number | null | undefined): string =>
  fraction === null || fraction === undefined || !Number.isFinite(fraction)
    ? MISSING
    : `${(fraction * 100).toFixed(1)}%`;

export const ms = (value: number): string => (Number.isFinite(value) ? `${value.toFixed(1)} ms` : MISSING);

export const tokensPerSecond = (value: number): string =>
  Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : MISSING;

export const count = (value: number | undefined): string =>
  value === undefined ? MISSING : value.toLocaleString('en-US');

/** `+36.0 points`, `-12.5%`: signed, one decimal. */
export function signed(value: number, unit: Shortfall['unit']): string {
  if (!Number.isFinite(value)) return MISSING;
  const text = value.toFixed(1);
  const sign = value > 0 && text !== '0.0' ? '+' : '';
  const shown = text === '-0.0' ? '0.0' : text;
  return unit === 'points' ? `${sign}${shown} points` : `${sign}${shown}%`;
}

/** `512 / 513`: requests per replica in replica order. */
export const split = (values: readonly number[]): string =>
  values.length === 0 ? MISSING : values.map((v) => count(v)).join(' / ');

/** `42.1% / 41.9%`: hit rate per replica in replica order. */
export const replicaRates = (values: readonly (number | null)[]): string =>
  values.length === 0 ? MISSING : values.map((v) => percent(v)).join(' / ');

function shortfallValue(row: Shortfall, value: number): string {
  switch (row.metric) {
    case 'hitRate':
      return percent(value);
    case 'totalTokensPerSecond':
      return tokensPerSecond(value);
    default:
      return ms(value);
  }
}

/** Whether the ideal partition is better or worse than the best arm on this metric. */
export function verdict(row: Shortfall): string {
  if (!Number.isFinite(row.difference) || row.difference.toFixed(1).replace('-', '') === '0.0') return 'same';
  return row.difference > 0 === row.higherIsBetter ? 'better' : 'worse';
}

const ARM_HEADERS = [
  'Arm',
  'Requests per replica',
  'Hit rate per replica',
  'Hit rate',
  'Total tok/s',
  'Mean TTFT',
  'p99 TTFT',
  'ITL',
];
const ARM_ALIGN: Align[] = ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right'];

/** The prefix-arm table: the measurement, its prediction, and the verdict against kube-proxy. */
const PREFIX_ARM_HEADERS = [
  ...ARM_HEADERS.slice(0, 4),
  'Predicted hit rate',
  'Hit rate vs kube-proxy',
  'Total tok/s',
  'Predicted tok/s',
  'Tok/s vs kube-proxy',
  ...ARM_HEADERS.slice(5),
];
const PREFIX_ARM_ALIGN: Align[] = ['left', ...PREFIX_ARM_HEADERS.slice(1).map((): Align => 'right')];

/** `78.1% +-0.6` */
export function estimateText(e: Estimate | undefined, text: (v: number) => string): string {
  if (!e || !Number.isFinite(e.mean)) return MISSING;
  const spread = text(e.spread).replace(/%$/, '').replace(/ ms$/, '');
  return `${text(e.mean)} +-${spread}`;
}

/** `+36.0 points, better (noise +-2.1, simulated)`; the baseline itself says so. */
export function comparisonText(c: Comparison | undefined, isBaseline: boolean): string {
  if (isBaseline) return 'baseline';
  if (!c) return 'no noise estimate';
  const band = c.unit === 'points' ? `${(c.band * 100).toFixed(1)} points` : tokensPerSecond(c.band);
  return `${signed(c.difference, c.unit)}, ${c.verdict} (noise +-${band}, ${c.noise})`;
}

function prefixArmCells(row: ArmRow, first: string): string[] {
  const [, requests, replicas, hit, tps, ...latencies] = armCells(row, first);
  const isBaseline = row.arm === 'kube-proxy';
  const vs = row.arm === 'partition' ? '—' : undefined;
  return [
    first,
    requests,
    replicas,
    row.repeats > 1 ? `${hit} (mean of ${row.repeats})` : hit,
    estimateText(row.prediction?.hitRate, percent),
    vs ?? comparisonText(row.vsBaseline?.hitRate, isBaseline),
    tps,
    estimateText(row.prediction?.totalTokensPerSecond, tokensPerSecond),
    vs ?? comparisonText(row.vsBaseline?.totalTokensPerSecond, isBaseline),
    ...latencies,
  ];
}

const optionalMs = (v: number | undefined) => (v === undefined ? MISSING : ms(v));

function detailCells(row: ArmRow, first: string): string[] {
  return [
    first,
    row.requestsPerSecond === undefined ? MISSING : row.requestsPerSecond.toFixed(2),
    tokensPerSecond(row.outputTokensPerSecond),
    optionalMs(row.medianTtftMs),
    optionalMs(row.meanTpotMs),
    estimateText(row.prediction?.requestsPerSecond, (v) => v.toFixed(2)),
    estimateText(row.prediction?.medianTtftMs, ms),
    estimateText(row.prediction?.p99TtftMs, ms),
  ];
}

function checkCells(check: PredictionCheck): string[] {
  const value = check.metric === 'hitRate' ? percent : tokensPerSecond;
  const label = check.promptBlind ? `${check.armTitle} [prompt-blind]` : check.armTitle;
  return [
    label,
    check.metric === 'hitRate' ? 'Hit rate' : 'Total tok/s',
    value(check.measured),
    value(check.predicted.mean),
    `${value(check.predicted.mean - check.band)} to ${value(check.predicted.mean + check.band)}`,
    check.outside ? 'OUTSIDE the predicted band' : 'inside',
  ];
}

/** Which noise the verdicts used, in one sentence. */
function noiseNote(tables: ReportTables): string {
  const measured = tables.prefixArms.filter((r) => r.repeats > 1).length;
  const seeds = tables.predictionSeeds.length;
  const simulated = `the simulated run-to-run spread (${seeds} client seeds)`;
  const source =
    tables.predictionsSource === 'study'
      ? 'Predictions are the ones the study ran with (study JSON).'
      : 'Predictions were recomputed from the recorded configuration (the study JSON holds none).';
  if (measured === 0) {
    return `Noise band of the verdicts: ${simulated}, since every arm ran once (study.repeats = 1); "same within noise" means the difference is within twice the combined spread. ${source}`;
  }
  return `Noise band of the verdicts: the measured spread over the repeats where both arms have two or more valid runs, otherwise ${simulated}; each verdict names which. ${source}`;
}

/** An arm's name as every table shows it: with its prompt-blind label when it has one. */
export function armLabel(row: ArmRow): string {
  return row.promptBlind ? `${row.armTitle} [${row.promptBlind}]` : row.armTitle;
}

function armCells(row: ArmRow, first: string): string[] {
  return [
    first,
    split(row.requests),
    replicaRates(row.replicaHitRates),
    percent(row.hitRate),
    tokensPerSecond(row.totalTokensPerSecond),
    ms(row.meanTtftMs),
    ms(row.p99TtftMs),
    ms(row.meanItlMs),
  ];
}

function boundCells(row: BoundRow): string[] {
  return [
    count(row.prefixes),
    count(row.workingSetTokens),
    percent(row.hitRate),
    percent(row.bound),
    tokensPerSecond(row.totalTokensPerSecond),
    ms(row.meanTtftMs),
    ms(row.meanItlMs),
  ];
}

/** What a run's checks could not establish, said under the invalid runs. */
function warningNotes(tables: ReportTables): string[] {
  return tables.warnings.flatMap((run) =>
    run.warnings.map((w) => `Not established for ${run.runId} (${run.valid ? 'valid' : 'invalid'}): ${w}`),
  );
}

function invalidCells(run: InvalidRun): string[] {
  return [run.runId, 'invalid', run.title, run.reasons.join('; ')];
}

function omittedNotes(ids: readonly string[]): string[] {
  return ids.length === 0 ? [] : [`Left out as invalid (see Invalid runs): ${ids.join(', ')}.`];
}

function emptyNote(rows: readonly unknown[], what: string): string[] {
  return rows.length === 0 ? [`No valid ${what}.`] : [];
}

/** True when any table holds a valid run: an empty study must not read as one that passed. */
function anyValidRun(tables: ReportTables): boolean {
  return (
    tables.partition !== undefined ||
    [tables.prefixArms, tables.bounds, tables.sharegpt, tables.sweep].some((rows) => rows.length > 0)
  );
}

/** Every table of the report, in reading order. */
export function reportSections(tables: ReportTables): ReportSection[] {
  const armRows = tables.prefixArms.map((row) => prefixArmCells(row, armLabel(row)));
  if (tables.partition) armRows.push(prefixArmCells(tables.partition, 'Ideal partition (reference)'));
  const detailRows = tables.prefixArms.map((row) => detailCells(row, armLabel(row)));
  if (tables.partition) detailRows.push(detailCells(tables.partition, 'Ideal partition (reference)'));
  const lot = tables.leftOnTable;
  const outside = tables.predictionChecks.filter((c) => c.outside);
  return [
    {
      id: 'arms',
      title: 'Arms: prefix workload',
      intro:
        'Each front end with the prefix workload. Requests and hit rates per replica are deltas of the ' +
        "replicas' vLLM counters; throughput and latencies come from the benchmark client. The ideal " +
        'partition is the reference the arms are judged against. An arm marked prompt-blind goes through a ' +
        'front end that cannot read the prompt over that API at its pinned version: it routes on load ' +
        'alone and is a control, not a prefix-aware result. Each measurement has its prediction beside it ' +
        '(mean +- spread over client seeds) and a verdict against the kube-proxy baseline: better, same ' +
        'within noise, or worse.',
      table: { headers: PREFIX_ARM_HEADERS, align: PREFIX_ARM_ALIGN, rows: armRows },
      notes: [
        ...emptyNote(tables.prefixArms, 'prefix-workload arm runs'),
        ...(tables.prefixArms.length > 0 ? [noiseNote(tables)] : []),
      ],
      warnings: omittedNotes([...tables.omitted.prefixArms, ...tables.omitted.partition]),
    },
    {
      id: 'arm-details',
      title: 'Arms: more client figures',
      intro:
        'The same runs: request throughput, output tokens per second, median TTFT and TPOT from the ' +
        "benchmark client, beside the simulator's predictions.",
      table: {
        headers: [
          'Arm',
          'Requests/s',
          'Output tok/s',
          'Median TTFT',
          'TPOT',
          'Predicted requests/s',
          'Predicted median TTFT',
          'Predicted p99 TTFT',
        ],
        align: ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right'],
        rows: detailRows,
      },
      notes: emptyNote(tables.prefixArms, 'prefix-workload arm runs'),
    },
    {
      id: 'prediction-vs-measurement',
      title: 'Prediction vs measurement',
      intro:
        "Each arm's measured hit rate and throughput against the band its prediction allows: twice the " +
        "simulated spread plus the model's tolerance (5 points of hit rate, its calibration tolerance; 15% " +
        'of throughput). An arm outside its band is where the lab learned something: a version behaving ' +
        'differently from its source reading, a misconfiguration, or a model to correct.',
      table: {
        headers: ['Arm', 'Figure', 'Measured', 'Predicted', 'Predicted band', 'Result'],
        align: ['left', 'left', 'right', 'right', 'right', 'left'],
        rows: tables.predictionChecks.map(checkCells),
      },
      notes: [
        ...emptyNote(tables.predictionChecks, 'arm run with a prediction'),
        ...(tables.predictionChecks.length > 0 && outside.length === 0
          ? ['Every measurement is inside its predicted band.']
          : []),
      ],
      warnings:
        outside.length === 0
          ? []
          : [
              `Outside the predicted band: ${unique(outside.map((c) => c.armTitle)).join(', ')}. Look here first.`,
            ],
    },
    ...(tables.calibrationSection ? [tables.calibrationSection] : []),
    {
      id: 'left-on-the-table',
      title: 'Left on the table',
      intro:
        'Per metric, the best valid prefix-workload arm (prompt-blind ones excepted) against the ideal partition. ' +
        'Hit rate differs in percentage points; the others as (ideal - best arm) / best arm.',
      ...(lot.available
        ? {
            table: {
              headers: ['Metric', 'Best arm', 'Best value', 'Ideal partition', 'Difference', 'Ideal is'],
              align: ['left', 'left', 'right', 'right', 'right', 'left'] as Align[],
              rows: lot.rows.map((row) => [
                row.label,
                row.bestArmTitle,
                shortfallValue(row, row.bestArm),
                shortfallValue(row, row.ideal),
                signed(row.difference, row.unit),
                verdict(row),
              ]),
            },
            notes: [
              lot.bestArms.length > 1
                ? `Best hit rate, indistinguishable within the noise (${lot.noise} spread): ${lot.bestArms.map((r) => `${r.armTitle} ${percent(r.hitRate)}`).join(', ')}.`
                : `Best hit rate: ${lot.bestArm.armTitle} ${percent(lot.bestArm.hitRate)}; no other arm is within the noise of it.`,
            ],
          }
        : { notes: [`Not available: ${lot.reason}.`] }),
    },
    {
      id: 'bounds',
      title: 'Upper-bound sweep: one replica directly',
      intro:
        'One replica without a front end, for several prefix counts. The bound is the formula ' +
        '(r - 1)/r x P / L beside the measured hit rate: the first request of each prefix misses, every ' +
        'repeat hits, suffix and chat-template tokens never hit.',
      table: {
        headers: [
          'Prefixes',
          'Working set (tokens)',
          'Measured hit rate',
          'Bound',
          'Total tok/s',
          'Mean TTFT',
          'ITL',
        ],
        align: ['right', 'right', 'right', 'right', 'right', 'right', 'right'],
        rows: tables.bounds.map(boundCells),
      },
      notes: emptyNote(tables.bounds, 'upper-bound runs'),
      warnings: omittedNotes(tables.omitted.bounds),
    },
    {
      id: 'sharegpt',
      title: 'ShareGPT control',
      intro:
        'Each front end with ShareGPT conversations, which share little prefix: routing for the cache ' +
        'should neither help nor hurt much here.',
      table: {
        headers: ARM_HEADERS,
        align: ARM_ALIGN,
        rows: tables.sharegpt.map((r) => armCells(r, armLabel(r))),
      },
      notes: [...emptyNote(tables.sharegpt, 'ShareGPT control runs')],
      warnings: omittedNotes(tables.omitted.sharegpt),
    },
    {
      id: 'sweep',
      title: 'Concurrency sweep',
      intro: "The swept arms at lower concurrency, beside their main run at the study's concurrency.",
      table: {
        headers: ['Arm', 'Concurrency', ...ARM_HEADERS.slice(1)],
        align: ['left', 'right', ...ARM_ALIGN.slice(1)],
        rows: tables.sweep.map((row) => {
          const [, ...rest] = armCells(row, row.armTitle);
          return [armLabel(row), count(row.concurrency), ...rest];
        }),
      },
      notes: emptyNote(tables.sweep, 'concurrency sweep runs'),
      warnings: omittedNotes(tables.omitted.sweep),
    },
    {
      id: 'invalid',
      title: 'Invalid runs',
      intro:
        'Runs that failed a validity check (docs/facts.md §4.4). They appear only here, with every reason, and ' +
        'never in a comparison, the best arm or a chart.',
      ...(tables.invalid.length > 0
        ? {
            table: {
              headers: ['Run', 'Status', 'Title', 'Invalid because'],
              align: ['left', 'left', 'left', 'left'] as Align[],
              rows: tables.invalid.map(invalidCells),
            },
            notes: warningNotes(tables),
          }
        : {
            notes: [
              anyValidRun(tables)
                ? 'Every recorded run passed every validity check.'
                : 'No run was recorded, so no validity check has run.',
              ...warningNotes(tables),
            ],
          }),
    },
    ...(tables.overlaps.length > 0
      ? [
          {
            id: 'overlaps',
            title: 'Runs that overlapped',
            intro:
              'Runs that executed beside others on other replicas (the bound sweep; both replica pairs with ' +
              "study.parallelism 2). They shared the host's CPUs and PCIe, never a GPU, cache or front end.",
            table: {
              headers: ['Run', 'Status', 'Title', 'Ran beside'],
              align: ['left', 'left', 'left', 'left'] as Align[],
              rows: tables.overlaps.map((row) => [
                row.runId,
                row.valid ? 'valid' : 'invalid',
                row.title,
                row.overlappedWith.join(', '),
              ]),
            },
            notes: [],
          },
        ]
      : []),
    {
      id: 'metadata',
      title: 'Study',
      intro:
        'Recorded once per study; the study JSON beside this report holds everything, including the configuration.',
      table: {
        headers: ['Recorded', 'Value'],
        align: ['left', 'left'],
        rows: tables.metadata.map((entry) => [entry.label, entry.value]),
      },
      notes: [],
    },
  ];
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)];
}
