import { type Align, count, MISSING, type ReportSection } from '../format.ts';
import type { CalibrationRow, ConntrackRow, NetworkReportTables, ScaleRow } from './table-rows.ts';
import {
  anyMs,
  coarseMs,
  cryptoFlags,
  emptyNote,
  fineMs,
  omitted,
  right,
  signedCount,
  signedFineMs,
  spread,
  table,
  times,
  vsBaseline,
} from './text.ts';

/**
 * The network report's Services-at-scale (E9), conntrack (E10) and calibration sections
 * (docs/facts.md §N6), each cell also against the baseline cell.
 */

const cellOf = (row: { cell: string; datapath: string }) => `${row.cell} (${row.datapath})`;

/** `1,017.0 / 1,020.7 ms`: a median and p90 in one cell. */
function medianP90(median: number | undefined, p90: number | undefined): string {
  if (median === undefined) return MISSING;
  return `${coarseMs(median).replace(/ ms$/, '')} / ${coarseMs(p90)}`;
}

function latencyCells(tables: NetworkReportTables, row: ScaleRow): string[] {
  return [
    cellOf(row),
    count(row.services),
    count(row.servicesReady),
    medianP90(row.programmingMedianMs, row.programmingP90Ms),
    row.services === 0
      ? '0-Service step'
      : row.programmingVsZero === undefined
        ? MISSING
        : times(row.programmingVsZero),
    vsBaseline(tables, row.cell, row.programmingVsBaseline, times),
    `${row.samplesConnected} / ${row.samplesConnected + row.samplesFailed}`,
    row.attemptsPerSample === undefined ? 'not recorded' : count(row.attemptsPerSample),
    row.firstAttemptDelayMaxMs === undefined ? 'not recorded' : coarseMs(row.firstAttemptDelayMaxMs),
    row.newConnection ? `${fineMs(row.newConnection.meanMs)} / ${fineMs(row.newConnection.p99Ms)}` : MISSING,
    vsBaseline(tables, row.cell, row.newConnectionVsBaseline, times),
  ];
}

/** `7.00`: entries per Service, two decimals (a measured mean over N Services). */
const perService = (value: number) => value.toLocaleString('en-US', { maximumFractionDigits: 2 });

function entriesCells(tables: NetworkReportTables, row: ScaleRow, zeroStep: boolean): string[] {
  const map = row.lbMapFull === undefined ? 'n/a' : row.lbMapFull ? 'MAP FULL' : 'no';
  const predicted = row.predictedPerService;
  return [
    cellOf(row),
    count(row.services),
    count(row.entries),
    row.services === 0
      ? '0-Service step'
      : row.entriesPerService !== undefined
        ? perService(row.entriesPerService)
        : zeroStep
          ? MISSING
          : 'no valid 0-Service step',
    predicted
      ? `${predicted.entries}${predicted.basis === 'estimate' ? ' (estimate)' : ' (from source)'}`
      : 'not recorded',
    vsBaseline(tables, row.cell, row.entriesVsBaseline, times),
    map,
  ];
}

function conntrackFailures(row: ConntrackRow): string {
  if (row.failures === undefined) return 'not recorded';
  const causes = Object.entries(row.failures)
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([cause, n]) => `${count(n)} ${cause}`);
  const dropped = row.droppedDuringHold ? [`${count(row.droppedDuringHold)} dropped while held`] : [];
  return [...causes, ...dropped].join(', ') || 'none';
}

function conntrackCells(tables: NetworkReportTables, row: ConntrackRow): string[] {
  // Restored to the host default read before the study's first E10 step (an older record: the value before the step).
  const target = row.restoredTo ?? row.limitBefore;
  const restored =
    row.limitAfterRestore === null
      ? 'NOT read back'
      : row.limitAfterRestore === target
        ? `yes (${count(row.limitAfterRestore)})`
        : `NO: ${count(row.limitAfterRestore)}, not ${count(target)}`;
  return [
    cellOf(row),
    row.requestedLimit === 'default' ? `${count(row.limit)} (host default)` : count(row.limit),
    count(row.baseline),
    count(row.connections),
    count(row.expectedSuccesses),
    count(row.succeeded),
    vsBaseline(tables, row.cell, row.succeededVsBaseline, signedCount),
    conntrackFailures(row),
    anyMs(row.connectP99Ms),
    anyMs(row.connectMaxMs),
    restored,
  ];
}

function calibrationCells(tables: NetworkReportTables, row: CalibrationRow): string[] {
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
    vsBaseline(tables, row.cell, row.vsBaseline, (v) =>
      v === undefined ? MISSING : `${times(v)} (${signedFineMs(row.diffVsBaselineMs)})`,
    ),
  ];
}

/** `vs dp-iptables`: the header of a column against the baseline cell. */
const vsHeader = (tables: NetworkReportTables, what: string) =>
  `${what} vs ${tables.baseline.cell ?? 'baseline'}`;

/** A warning when the report has no baseline cell (nothing is compared across cells). */
function noBaseline(tables: NetworkReportTables): string[] {
  return tables.baseline.cell === undefined ? [`No baseline cell: ${tables.baseline.reason}.`] : [];
}

export function scaleSections(tables: NetworkReportTables): ReportSection[] {
  const zeroStep = new Set(tables.scale.filter((r) => r.services === 0).map((r) => r.cell));
  const estimates = [
    ...new Map(
      tables.scale.flatMap((r) =>
        r.predictedPerService
          ? [
              [
                r.datapath,
                `${r.datapath}: ${r.predictedPerService.formula} with B = ${r.predictedPerService.backendsPerService} backend(s) per Service, ${r.predictedPerService.basis === 'estimate' ? 'an estimate (the shape read in the source, the exact listing at the pinned version not confirmed)' : 'read in the pinned source'}`,
              ] as const,
            ]
          : [],
      ),
    ).values(),
  ];
  return [
    {
      id: 'services-at-scale',
      title: 'Services at scale: new-Service latency',
      intro:
        "E9, per cell's datapath and Service count: the time from the API's acceptance of a new Service to " +
        "the prober's first connect to its ClusterIP (median / p90 of the connected samples), against the " +
        "cell's own 0-Service step and the baseline cell's step of the same count; the attempts each sample " +
        'took since the acceptance (median) and the longest delay to its first attempt (at most one 20 ms attempt ' +
        "when the prober was already probing); fortio's new-connection latency (-keepalive=false, mean / p99).",
      table: table(
        [
          'Cell (datapath)',
          'Services',
          'Ready',
          'Programming median / p90',
          'vs 0 Services',
          vsHeader(tables, 'Median'),
          'Samples connected',
          'Attempts per sample',
          'First attempt after (max)',
          'New-connection mean / p99',
          vsHeader(tables, 'Mean'),
        ],
        ['left', ...right(10)],
        tables.scale.map((r) => latencyCells(tables, r)),
      ),
      notes: emptyNote(tables.scale, 'Service scale steps'),
      warnings: [...omitted(tables, ['E9']), ...noBaseline(tables)],
    },
    {
      id: 'services-entries',
      title: 'Services at scale: data-plane entries',
      intro:
        'E9: the entries the datapath holds at each Service count, counted its own way, and what each Service ' +
        "added: measured as (entries - entries at 0 Services) / Services on the cell's own valid 0-Service step, " +
        'beside what the pinned sources predict for one Service with its backends.',
      table: table(
        [
          'Cell (datapath)',
          'Services',
          'Entries',
          'Per Service, measured',
          'Per Service, predicted',
          vsHeader(tables, 'Entries'),
          'LB map full',
        ],
        ['left', ...right(5), 'left'],
        tables.scale.map((r) => entriesCells(tables, r, zeroStep.has(r.cell))),
      ),
      notes: [
        ...emptyNote(tables.scale, 'Service scale steps'),
        ...[...new Set(tables.scale.map((r) => `${r.cell}: entries by \`${r.entriesCommand}\`.`))],
        ...(estimates.length > 0 ? [`Predicted per Service: ${estimates.join('; ')}.`] : []),
      ],
      warnings: omitted(tables, ['E9']),
    },
  ];
}

export function conntrackSection(tables: NetworkReportTables): ReportSection {
  return {
    id: 'conntrack',
    title: 'Conntrack table full',
    intro:
      'E10: simultaneous loopback connections against nf_conntrack_max. Each connection costs about one ' +
      'entry, so about limit - baseline connections succeed (the expected column, at most the connections ' +
      'driven). Failures by cause, as the driver saw them: a full table drops the SYN, so its failures are ' +
      'timeouts; emfile and no-local-port are limits of the driver, not of conntrack. Connect p99 and max are of ' +
      'the connections that succeeded; a max near 1 s is a SYN retransmitted after the table dropped the first. ' +
      "The limit must be restored to the host's default after every step.",
    table: table(
      [
        'Cell (datapath)',
        'Limit',
        'Baseline',
        'Connections',
        'Expected',
        'Succeeded',
        vsHeader(tables, 'Succeeded'),
        'Failed, by cause',
        'Connect p99',
        'Connect max',
        'Limit restored',
      ],
      ['left', ...right(6), 'left', 'right', 'right', 'left'] as Align[],
      tables.conntrack.map((r) => conntrackCells(tables, r)),
    ),
    notes: emptyNote(tables.conntrack, 'conntrack steps'),
    warnings: omitted(tables, ['E10']),
  };
}

export function calibrationSection(tables: NetworkReportTables): ReportSection {
  return {
    id: 'calibration',
    title: 'Calibration per cell',
    intro:
      "E1's plain fixed-rate run on every cell, client to server by pod IP (no Service), with the host beside " +
      'it, and each cell against the baseline cell. Cells should agree within a few percent; a larger ' +
      'difference is the host, and a datapath comparison across those cells inherits it.',
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
        vsHeader(tables, 'Mean'),
      ],
      ['left', 'left', 'left', 'left', 'left', 'left', ...right(6)],
      tables.calibration.map((r) => calibrationCells(tables, r)),
    ),
    notes: emptyNote(
      tables.calibration.filter((c) => c.summary),
      'calibration runs',
    ),
    warnings: [...omitted(tables, ['C']), ...noBaseline(tables)],
  };
}
