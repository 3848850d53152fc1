import { type Align, count, MISSING, percent, type ReportSection } from '../format.ts';
import { calibrationSection, conntrackSection, scaleSections } from './format-scale.ts';
import { headlineSection } from './headline.ts';
import type { Attribution, AttributionPart, LatencyRow, MtlsRow, NetworkReportTables } from './table-rows.ts';
import {
  coarseMs,
  cryptoFlags,
  curlSymptom,
  emptyNote,
  fineMs,
  fineRange,
  mib,
  mibPerSecond,
  omitted,
  qps,
  right,
  spread,
  table,
  times,
} from './text.ts';

/**
 * The network report's sections as text cells (docs/facts.md §N6), shared by its Markdown and
 * HTML renderers: the headline, the mesh experiments here, the Service-scale, conntrack and
 * calibration sections in format-scale.ts, the values' formats in text.ts.
 */

export { anyMs, coarseMs, curlSymptom, fineMs, qps, spread, times } from './text.ts';

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
    row.arm === 'plain' ? 'reference' : times(row.meanVsPlain),
    row.arm === 'plain' ? 'reference' : times(row.saturationVsPlain),
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

/** `0.258 to 0.282 ms`, or why there is no interval. */
function intervalText(interval: AttributionPart['interval']): string {
  const range = `${interval.lowMs.toFixed(3)} to ${interval.highMs.toFixed(3)} ms`;
  if (interval.distinguishable === 'unknown') return `${range} (one repeat: unknown)`;
  return interval.distinguishable === 'no' ? `${range} (holds 0: indistinguishable)` : range;
}

/** A part that cannot be told from zero, or could not be judged, is a warning: no conclusion rests on it. */
function attributionWarnings(a: Attribution): string[] {
  if (!a.available) return [];
  return a.parts.flatMap((p) => {
    if (p.interval.distinguishable === 'no') {
      return [
        `Cell ${a.cell}: ${p.label} (${fineMs(p.ms)}) is not distinguishable from zero: its interval over the repeats, ${intervalText(p.interval).replace(/ \(.*\)$/, '')}, holds 0.`,
      ];
    }
    if (p.interval.distinguishable === 'unknown') {
      return [`Cell ${a.cell}: ${p.label} rests on an arm with one valid repeat: its noise is unknown.`];
    }
    return [];
  });
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

/** Every table of the network report, in reading order. */
export function networkReportSections(tables: NetworkReportTables): ReportSection[] {
  const multiCell = tables.cells.length > 1;
  /** With several cells, the per-arm tables start with the cell. */
  const cellCol = multiCell ? ['Cell'] : [];
  const deviations = tables.mtls.filter((r) => r.deviation);
  const attributionRows = tables.attribution.flatMap((a) =>
    a.available
      ? [
          ...a.parts.map((p) => [
            a.cell,
            p.label,
            p.formula,
            fineMs(p.ms),
            intervalText(p.interval),
            percent(p.share),
          ]),
          [
            a.cell,
            'Total added by the mesh',
            'E3 mesh-mtls - E3 plain',
            fineMs(a.totalMs),
            intervalText(a.totalInterval),
            percent(1),
          ],
        ]
      : [],
  );
  return [
    headlineSection(tables),
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
      notes: emptyNote(tables.latency, 'fortio latency runs of E1, E1s, E3 or E4'),
      warnings: [
        ...omitted(tables, ['E1', 'E1s', 'E3', 'E4']),
        ...tables.flagged.map((f) => `${f.cell}/${f.runId} is flagged: ${f.flags.join('; ')}.`),
      ],
    },
    {
      id: 'attribution',
      title: 'Where the added latency goes',
      intro:
        "The mesh's added latency at the fixed rate, split into proxy hops, HTTP parsing and encryption from " +
        "E3's and E4's arms. Shares are of the total. The interval is where the part lies given its arms' " +
        "repeats: each arm's mean taken anywhere between its lowest and highest repeat (interval arithmetic, no " +
        'distribution assumed). A part whose interval holds zero is not distinguishable from no cost.',
      table: table(
        ['Cell', 'Part', 'Computed as', 'Added latency', 'Interval over the repeats', 'Share'],
        ['left', 'left', 'left', 'right', 'right', 'right'],
        attributionRows,
      ),
      notes: [
        ...(tables.attribution.length === 0 ? ['No cell with a mesh ran E3 and E4.'] : []),
        ...tables.attribution.flatMap(attributionNotes),
      ],
      warnings: tables.attribution.flatMap(attributionWarnings),
    },
    {
      id: 'grpc',
      title: 'Protocols: gRPC unary',
      intro:
        "E5: fortio -grpc -ping at the fixed rate; means over the valid repeats, and the range of the repeats' means (min to max).",
      table: table(
        [...cellCol, 'Arm', 'Repeats', 'Mean', 'Mean, min to max', 'p50', 'p99', 'QPS', 'Mean vs plain'],
        [...cellCol.map((): Align => 'left'), 'left', ...right(7)],
        tables.grpc.map((r) => [
          ...(multiCell ? [r.cell] : []),
          r.arm,
          String(r.summary.repeats),
          fineMs(r.summary.meanMs),
          fineRange(Math.min(...r.summary.repeatMeansMs), Math.max(...r.summary.repeatMeansMs)),
          fineMs(r.summary.p50Ms),
          fineMs(r.summary.p99Ms),
          qps(r.summary.actualQps),
          r.arm === 'plain' ? 'reference' : times(r.meanVsPlain),
        ]),
      ),
      notes: emptyNote(tables.grpc, 'gRPC runs'),
      warnings: omitted(tables, ['E5']),
    },
    {
      id: 'download',
      title: 'Protocols: large download',
      intro:
        "E6: one download per repeat through fortio's echo handler; curl's total time and speed, means over the " +
        'valid repeats, with the range of the repeats (min to max).',
      table: table(
        [
          ...cellCol,
          'Arm',
          'Size',
          'Repeats',
          'Time',
          'Time, min to max',
          'Speed',
          'Speed, min to max',
          'Time vs plain',
        ],
        [...cellCol.map((): Align => 'left'), 'left', ...right(7)],
        tables.downloads.map((r) => [
          ...(multiCell ? [r.cell] : []),
          r.arm,
          mib(r.bytes),
          String(r.repeats),
          `${r.meanSeconds.toFixed(3)} s`,
          `${r.minSeconds.toFixed(3)} to ${r.maxSeconds.toFixed(3)} s`,
          mibPerSecond(r.meanBytesPerSecond),
          `${mibPerSecond(r.minBytesPerSecond).replace(/ MiB\/s$/, '')} to ${mibPerSecond(r.maxBytesPerSecond)}`,
          r.arm === 'plain' ? 'reference' : times(r.timeVsPlain),
        ]),
      ),
      notes: emptyNote(tables.downloads, 'download runs'),
      warnings: omitted(tables, ['E6']),
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
      notes: emptyNote(tables.sse, 'SSE runs'),
      warnings: omitted(tables, ['E7']),
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
        ...(deviations.length === 0 && tables.mtls.length > 0 ? ['Every case behaved as expected.'] : []),
      ],
      warnings: [
        ...(deviations.length > 0
          ? [
              `Findings: ${deviations.map((d) => `${d.cell}/${d.caseId}`).join(', ')} differ from what was expected.`,
            ]
          : []),
        ...omitted(tables, ['E2', 'E8']),
      ],
    },
    ...scaleSections(tables),
    conntrackSection(tables),
    calibrationSection(tables),
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
