import type { CurlOutcome } from '../../network/study/model.ts';
import { type Align, count, MISSING, percent, type ReportSection, type TextTable } from '../format.ts';
import type {
  Attribution,
  CalibrationRow,
  ConntrackRow,
  LatencyRow,
  MtlsRow,
  NetworkReportTables,
  RepeatSummary,
  ScaleRow,
} from './tables.ts';
import { REPEAT_SPREAD_LIMIT_PERCENT } from './tables.ts';

/**
 * The network report's tables as text cells (docs/facts.md §N6), shared by its Markdown and HTML
 * renderers. Latencies of the mesh experiments are sub-millisecond: three decimals (microseconds);
 * programming latencies one decimal; throughput whole calls per second; a missing value is an em dash.
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

/** `x3.90`: a ratio to the plain arm (or the first cell). */
export const times = (value: number | undefined): string =>
  value === undefined || !Number.isFinite(value) ? MISSING : `x${value.toFixed(2)}`;

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

const mib = (bytes: number) =>
  `${(bytes / (1024 * 1024)).toLocaleString('en-US', { maximumFractionDigits: 1 })} MiB`;
const mibPerSecond = (bytesPerSecond: number) =>
  `${(bytesPerSecond / (1024 * 1024)).toLocaleString('en-US', { maximumFractionDigits: 1 })} MiB/s`;

const right = (n: number): Align[] => Array.from({ length: n }, (): Align => 'right');

const GROUP_TITLES: Readonly<Record<LatencyRow['group'], string>> = {
  E1: 'E1/E1s sidecar cost',
  E3: 'E3 encryption vs hops',
  E4: 'E4 HTTP parsing vs L4',
};

function latencyCells(row: LatencyRow, multiCell: boolean): string[] {
  const f = row.fixed;
  return [
    ...(multiCell ? [row.cell] : []),
    GROUP_TITLES[row.group],
    row.arm,
    f ? String(f.repeats) : MISSING,
    fineMs(f?.meanMs),
    fineMs(f?.p50Ms),
    fineMs(f?.p90Ms),
    fineMs(f?.p99Ms),
    spread(f),
    row.saturation ? `${qps(row.saturation.actualQps)} (${row.saturation.repeats})` : MISSING,
    row.arm === 'plain' ? 'baseline' : times(row.meanVsPlain),
    row.arm === 'plain' ? 'baseline' : times(row.saturationVsPlain),
  ];
}

function attributionNotes(a: Attribution): string[] {
  if (!a.available) return [`Cell ${a.cell}: attribution not available: ${a.reason}.`];
  const i = a.inputs;
  const f = (v: number) => v.toFixed(3);
  return [
    `Cell ${a.cell}, from the fixed-rate means: total added = E3 mesh-mtls - E3 plain = ${f(i['mesh-mtls'])} - ${f(i.plain)} = ${f(a.totalMs)} ms. ` +
      `HTTP parsing = E4 mesh-l7 - E4 mesh-l4 = ${f(i['mesh-l7'])} - ${f(i['mesh-l4'])}; ` +
      `encryption = E3 mesh-mtls - E3 mesh-mtls-off = ${f(i['mesh-mtls'])} - ${f(i['mesh-mtls-off'])}; ` +
      `proxy hops = (E3 mesh-mtls-off - E3 plain) - HTTP parsing = (${f(i['mesh-mtls-off'])} - ${f(i.plain)}) - ${f(i['mesh-l7'] - i['mesh-l4'])}: ` +
      'the mTLS-off arm already goes through both sidecars on the http- port, so its difference to plain holds the parsing too.',
  ];
}

function mtlsCells(row: MtlsRow, multiCell: boolean): string[] {
  return [
    ...(multiCell ? [row.cell] : []),
    row.experiment,
    row.title,
    row.client,
    curlSymptom(row.expected),
    curlSymptom(row.observed),
    row.deviation ? 'FINDING: differs from expected' : 'as expected',
  ];
}

function scaleCells(row: ScaleRow): string[] {
  const map = row.lbMapFull === undefined ? '' : row.lbMapFull ? ' (map full)' : '';
  return [
    `${row.cell} (${row.datapath})`,
    count(row.services),
    count(row.servicesReady),
    `${count(row.entries)}${map}`,
    coarseMs(row.programmingMedianMs),
    coarseMs(row.programmingP90Ms),
    `${row.samplesConnected} / ${row.samplesConnected + row.samplesFailed}`,
    row.attemptsPerSample === undefined ? '—' : count(row.attemptsPerSample),
    coarseMs(row.firstAttemptDelayMaxMs),
    fineMs(row.newConnection?.meanMs),
    fineMs(row.newConnection?.p99Ms),
  ];
}

function conntrackCells(row: ConntrackRow): string[] {
  const restored =
    row.limitAfterRestore === null
      ? 'NOT read back'
      : row.limitAfterRestore === row.limitBefore
        ? `yes (${count(row.limitAfterRestore)})`
        : `NO: ${count(row.limitAfterRestore)}, was ${count(row.limitBefore)}`;
  return [
    `${row.cell} (${row.datapath})`,
    row.requestedLimit === 'default' ? `${count(row.limit)} (host default)` : count(row.limit),
    count(row.baseline),
    count(row.connections),
    count(row.expectedSuccesses),
    count(row.succeeded),
    count(row.failed),
    anyMs(row.connectP99Ms),
    anyMs(row.connectMaxMs),
    restored,
  ];
}

/** `aes, vaes` of the CPU flags that matter for encryption cost, or what is missing. */
function cryptoFlags(flags: readonly string[]): string {
  const wanted = ['aes', 'vaes'];
  return wanted.map((flag) => (flags.includes(flag) ? flag : `no ${flag}`)).join(', ');
}

function calibrationCells(row: CalibrationRow): string[] {
  const s = row.summary;
  return [
    row.cell,
    row.datapath,
    row.mesh,
    `${row.host.instanceType}, ${row.host.availabilityZone}`,
    row.host.kernel,
    cryptoFlags(row.host.cpuFlags),
    s ? String(s.repeats) : MISSING,
    fineMs(s?.meanMs),
    fineMs(s?.p50Ms),
    fineMs(s?.p99Ms),
    spread(s),
    times(row.vsFirst),
  ];
}

function emptyNote(rows: readonly unknown[], what: string): string[] {
  return rows.length === 0 ? [`No valid ${what}.`] : [];
}

function omitted(tables: NetworkReportTables, experiments: readonly string[]): string[] {
  const ids = tables.invalid
    .filter((r) => experiments.includes(r.experiment))
    .map((r) => `${r.cell}/${r.runId}`);
  return ids.length === 0 ? [] : [`Left out as invalid (see Invalid runs): ${[...new Set(ids)].join(', ')}.`];
}

function table(headers: string[], align: Align[], rows: string[][]): TextTable {
  return { headers, align, rows };
}

/** Every table of the network report, in reading order. */
export function networkReportSections(tables: NetworkReportTables): ReportSection[] {
  const multiCell = tables.cells.length > 1;
  /** With several cells, the per-arm tables start with the cell. */
  const cellCol = multiCell ? ['Cell'] : [];
  const deviations = tables.mtls.filter((r) => r.deviation);
  const attributionRows = tables.attribution.flatMap((a) =>
    a.available
      ? [
          ...a.parts.map((p) => [a.cell, p.label, p.formula, fineMs(p.ms), percent(p.share)]),
          [a.cell, 'Total added by the mesh', 'E3 mesh-mtls - E3 plain', fineMs(a.totalMs), percent(1)],
        ]
      : [],
  );
  return [
    {
      id: 'cells',
      title: 'Cells',
      intro:
        'One single-node K3s cluster per datapath, each with its own study. The host facts matter: encryption ' +
        'cost depends on the CPU (aes, vaes), and a different instance type or kernel would show up as a ' +
        'datapath difference.',
      table: table(
        [
          'Cell',
          'Datapath',
          'Mesh',
          'Study',
          'State',
          'Runs valid / recorded',
          'Host',
          'Versions',
          'Datapath evidence',
        ],
        ['left', 'left', 'left', 'left', 'left', 'right', 'left', 'left', 'left'],
        tables.cells.map((c) => [
          c.cell,
          c.datapath,
          c.mesh,
          c.studyId,
          c.error ? `${c.state}: ${c.error}` : c.state,
          `${c.validRuns} / ${c.runs}`,
          `${c.host.instanceType}, ${c.host.availabilityZone}, kernel ${c.host.kernel}, ${cryptoFlags(c.host.cpuFlags)}`,
          Object.entries(c.host.versions)
            .map(([k, v]) => `${k} ${v}`)
            .join(', '),
          c.datapathEvidence
            ? `KPR ${c.datapathEvidence.kubeProxyReplacement ?? 'n/a'}, KUBE-SVC chains ${c.datapathEvidence.kubeSvcChains}, ` +
              `nft kube-proxy table ${c.datapathEvidence.nftKubeProxyTable ? 'yes' : 'no'}, ipvs services ${c.datapathEvidence.ipvsServices}`
            : MISSING,
        ]),
      ),
      notes: emptyNote(tables.cells, 'cell study'),
    },
    {
      id: 'sidecar-cost',
      title: 'Sidecar cost',
      intro:
        'fortio at a fixed rate (500 QPS over 16 connections by default): mean and percentiles are means over ' +
        "the arm's valid repeats. Saturation QPS is fortio at -qps 0 (valid repeats in brackets). The ratios " +
        'compare each arm with the plain arm of the same experiment. Repeat spread is the largest distance of ' +
        "a repeat's mean from the arm's mean; beyond +-3% the arm is flagged, not hidden.",
      table: table(
        [
          ...cellCol,
          'Experiment',
          'Arm',
          'Repeats',
          'Mean',
          'p50',
          'p90',
          'p99',
          'Repeat spread',
          'Saturation QPS',
          'Mean vs plain',
          'Saturation QPS vs plain',
        ],
        [...cellCol.map((): Align => 'left'), 'left', 'left', ...right(9)],
        tables.latency.map((r) => latencyCells(r, multiCell)),
      ),
      notes: [
        ...emptyNote(tables.latency, 'fortio latency runs of E1, E1s, E3 or E4'),
        ...omitted(tables, ['E1', 'E1s', 'E3', 'E4']),
      ],
    },
    {
      id: 'attribution',
      title: 'Where the added latency goes',
      intro:
        "The mesh's added latency at the fixed rate, split into proxy hops, HTTP parsing and encryption from " +
        "E3's and E4's arms. Shares are of the total; a negative part means the difference is within the noise.",
      table: table(
        ['Cell', 'Part', 'Computed as', 'Added latency', 'Share'],
        ['left', 'left', 'left', 'right', 'right'],
        attributionRows,
      ),
      notes: [
        ...(tables.attribution.length === 0 ? ['No cell with a mesh ran E3 and E4.'] : []),
        ...tables.attribution.flatMap(attributionNotes),
      ],
    },
    {
      id: 'grpc',
      title: 'Protocols: gRPC unary',
      intro: 'E5: fortio -grpc -ping at the fixed rate; means over the valid repeats.',
      table: table(
        [...cellCol, 'Arm', 'Repeats', 'Mean', 'p50', 'p99', 'QPS', 'Mean vs plain'],
        [...cellCol.map((): Align => 'left'), 'left', ...right(6)],
        tables.grpc.map((r) => [
          ...(multiCell ? [r.cell] : []),
          r.arm,
          String(r.summary.repeats),
          fineMs(r.summary.meanMs),
          fineMs(r.summary.p50Ms),
          fineMs(r.summary.p99Ms),
          qps(r.summary.actualQps),
          r.arm === 'plain' ? 'baseline' : times(r.meanVsPlain),
        ]),
      ),
      notes: [...emptyNote(tables.grpc, 'gRPC runs'), ...omitted(tables, ['E5'])],
    },
    {
      id: 'download',
      title: 'Protocols: large download',
      intro:
        "E6: one download per repeat through fortio's echo handler; curl's total time and speed, means over the valid repeats.",
      table: table(
        [...cellCol, 'Arm', 'Size', 'Repeats', 'Time', 'Speed', 'Time vs plain'],
        [...cellCol.map((): Align => 'left'), 'left', ...right(5)],
        tables.downloads.map((r) => [
          ...(multiCell ? [r.cell] : []),
          r.arm,
          mib(r.bytes),
          String(r.repeats),
          `${r.meanSeconds.toFixed(3)} s`,
          mibPerSecond(r.meanBytesPerSecond),
          r.arm === 'plain' ? 'baseline' : times(r.timeVsPlain),
        ]),
      ),
      notes: [...emptyNote(tables.downloads, 'download runs'), ...omitted(tables, ['E6'])],
    },
    {
      id: 'sse',
      title: 'Protocols: SSE streaming',
      intro:
        "E7: the gaps between consecutive events as the lab's SSE client saw them. The server sends one event " +
        'per interval, so a gap median at the interval and a small p99 mean the proxy passes events on as they come.',
      table: table(
        [...cellCol, 'Arm', 'Repeats', 'Interval', 'Gap median', 'Gap p99', 'Largest gap', 'Events'],
        [...cellCol.map((): Align => 'left'), 'left', ...right(6)],
        tables.sse.map((r) => [
          ...(multiCell ? [r.cell] : []),
          r.arm,
          String(r.repeats),
          coarseMs(r.intervalMs),
          coarseMs(r.gapMedianMs),
          coarseMs(r.gapP99Ms),
          coarseMs(r.gapMaxMs),
          `${count(r.eventsReceived)} / ${count(r.eventsExpected)}`,
        ]),
      ),
      notes: [...emptyNote(tables.sse, 'SSE runs'), ...omitted(tables, ['E7'])],
    },
    {
      id: 'mtls-matrix',
      title: 'mTLS matrix',
      intro:
        'E2 and E8: one curl per case, expected against observed. STRICT rejects an out-of-mesh plaintext client ' +
        'by dropping the connection (HTTP 000, curl exit 56); an AuthorizationPolicy denies with HTTP 403. ' +
        'A case that differs from its expectation is a finding about the configuration, not a failed run.',
      table: table(
        [...cellCol, 'Experiment', 'Case', 'Client', 'Expected', 'Observed', 'Result'],
        [...cellCol.map((): Align => 'left'), 'left', 'left', 'left', 'left', 'left', 'left'],
        tables.mtls.map((r) => mtlsCells(r, multiCell)),
      ),
      notes: [
        ...emptyNote(tables.mtls, 'mTLS matrix runs'),
        ...(deviations.length > 0
          ? [
              `Findings: ${deviations.map((d) => `${d.cell}/${d.caseId}`).join(', ')} differ from what was expected.`,
            ]
          : tables.mtls.length > 0
            ? ['Every case behaved as expected.']
            : []),
        ...omitted(tables, ['E2', 'E8']),
      ],
    },
    {
      id: 'services-at-scale',
      title: 'Services at scale',
      intro:
        "E9, per cell's datapath and Service count: data-plane entries counted the datapath's way, the time until " +
        "a new Service's ClusterIP connects (the prober's connected samples: median and p90), and fortio's " +
        'new-connection latency (-keepalive=false) at that count.',
      table: table(
        [
          'Cell (datapath)',
          'Services',
          'Ready',
          'Entries',
          'Programming median',
          'Programming p90',
          'Samples connected',
          'Attempts per sample',
          'First attempt after (max)',
          'New-connection mean',
          'New-connection p99',
        ],
        ['left', ...right(8)],
        tables.scale.map(scaleCells),
      ),
      notes: [
        ...emptyNote(tables.scale, 'Service scale steps'),
        ...[...new Set(tables.scale.map((r) => `${r.cell}: entries by \`${r.entriesCommand}\``))],
        ...omitted(tables, ['E9']),
      ],
    },
    {
      id: 'conntrack',
      title: 'Conntrack table full',
      intro:
        'E10: simultaneous loopback connections against nf_conntrack_max. Each connection costs about one ' +
        'entry, so about limit - baseline connections succeed (the expected column, at most the connections ' +
        'driven); the rest time out. Connect p99 and max are of the connections that succeeded; a max near ' +
        '1 s is a SYN retransmitted after the table dropped the first. The limit must be restored after every step.',
      table: table(
        [
          'Cell (datapath)',
          'Limit',
          'Baseline',
          'Connections',
          'Expected',
          'Succeeded',
          'Failed',
          'Connect p99',
          'Connect max',
          'Limit restored',
        ],
        ['left', ...right(8), 'left'],
        tables.conntrack.map(conntrackCells),
      ),
      notes: [...emptyNote(tables.conntrack, 'conntrack steps'), ...omitted(tables, ['E10'])],
    },
    {
      id: 'calibration',
      title: 'Calibration per cell',
      intro:
        "E1's plain fixed-rate run on every cell, with the host beside it. Cells should agree within a few " +
        'percent; a larger difference is the host, and a datapath comparison across those cells inherits it.',
      table: table(
        [
          'Cell',
          'Datapath',
          'Mesh',
          'Instance',
          'Kernel',
          'CPU crypto',
          'Repeats',
          'Mean',
          'p50',
          'p99',
          'Repeat spread',
          `Mean vs ${tables.calibration.find((c) => c.summary)?.cell ?? 'first cell'}`,
        ],
        ['left', 'left', 'left', 'left', 'left', 'left', ...right(6)],
        tables.calibration.map(calibrationCells),
      ),
      notes: [
        ...emptyNote(
          tables.calibration.filter((c) => c.summary),
          'calibration runs',
        ),
        ...omitted(tables, ['C']),
      ],
    },
    {
      id: 'invalid',
      title: 'Invalid runs',
      intro:
        'Runs that failed a validity check (docs/facts.md §N5). They appear only here, with every reason, and ' +
        'never in a comparison or a chart. A resumed run may show an invalid attempt here and its valid attempt above.',
      ...(tables.invalid.length > 0
        ? {
            table: table(
              ['Cell', 'Run', 'Status', 'Title', 'Invalid because'],
              ['left', 'left', 'left', 'left', 'left'],
              tables.invalid.map((r) => [
                r.cell,
                r.attempt === undefined ? r.runId : `${r.runId} (attempt ${r.attempt})`,
                'invalid',
                r.title,
                r.reasons.join('; '),
              ]),
            ),
            notes: [],
          }
        : {
            notes: [
              tables.cells.some((c) => c.validRuns > 0)
                ? 'Every recorded run passed every validity check.'
                : 'No run was recorded, so no validity check has run.',
            ],
          }),
    },
    {
      id: 'flagged',
      title: 'Flagged runs',
      intro:
        'Valid runs with a warning that does not invalidate them (the repeat spread): they are in the tables above.',
      table: table(
        ['Cell', 'Run', 'Flag'],
        ['left', 'left', 'left'],
        tables.flagged.map((r) => [r.cell, r.runId, r.flags.join('; ')]),
      ),
      notes: tables.flagged.length === 0 ? ['No valid run is flagged.'] : [],
    },
  ];
}
