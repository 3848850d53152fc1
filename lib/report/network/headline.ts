import { count, percent, type ReportSection } from '../format.ts';
import { DEFAULT_BASELINE_RULE } from './baseline.ts';
import type { Attribution, NetworkReportTables, ScaleRow } from './table-rows.ts';
import { coarseMs, curlSymptom, fineMs, qps, times } from './text.ts';

/**
 * The network report's headline (docs/facts.md §N6): the study's answers in five lines, ahead of
 * the tables, computed from the same valid runs; a question without a valid run says so.
 */

function sidecarLine(tables: NetworkReportTables): string {
  const rows = tables.latency.filter((r) => r.group === 'E1');
  const mesh = rows.find((r) => r.arm === 'mesh-mtls' && r.fixed);
  const plain = rows.find((r) => r.arm === 'plain' && r.cell === mesh?.cell && r.fixed);
  if (!mesh?.fixed || !plain?.fixed)
    return 'Sidecar cost (E1): no valid fixed-rate runs of both plain and mesh-mtls.';
  const saturation =
    mesh.saturation && plain.saturation
      ? `; at saturation ${qps(mesh.saturation.actualQps)} calls/s against ${qps(plain.saturation.actualQps)} (${times(mesh.saturationVsPlain)})`
      : '; no valid saturation runs of both arms';
  return (
    `Sidecar cost (E1, cell ${mesh.cell}, fixed rate): mesh-mtls ${fineMs(mesh.fixed.meanMs)} mean against plain ` +
    `${fineMs(plain.fixed.meanMs)} (${times(mesh.meanVsPlain)})${saturation}.`
  );
}

function attributionLine(attribution: readonly Attribution[]): string {
  const a = attribution.find((x) => x.available);
  if (!a?.available) {
    const reason = attribution.find((x) => !x.available);
    return `Where the added latency goes: not available${reason && !reason.available ? ` (${reason.cell}: ${reason.reason})` : ' (no mesh cell ran E3 and E4)'}.`;
  }
  const parts = a.parts.map(
    (p) => `${p.label.replace(/ \(.*\)$/, '').toLowerCase()} ${fineMs(p.ms)} (${percent(p.share)})`,
  );
  const within = a.parts.filter((p) => p.interval.distinguishable === 'no').map((p) => p.label.toLowerCase());
  const unknown = a.parts.some((p) => p.interval.distinguishable === 'unknown');
  const verdict =
    within.length > 0
      ? `; not distinguishable from zero over the repeats: ${within.join(', ')}`
      : unknown
        ? '; an arm has one repeat, so no part can be judged against its noise'
        : '; every part is distinguishable from zero over the repeats';
  return `Where the added latency goes (cell ${a.cell}): ${fineMs(a.totalMs)} = ${parts.join(' + ')}${verdict}.`;
}

function mtlsLine(tables: NetworkReportTables): string {
  if (tables.mtls.length === 0) return 'mTLS matrix (E2, E8): no valid run.';
  const findings = tables.mtls.filter((r) => r.deviation);
  const head = `mTLS matrix (E2, E8): ${tables.mtls.length - findings.length} of ${tables.mtls.length} cases as expected`;
  if (findings.length === 0) return `${head}.`;
  const listed = findings.map(
    (f) => `${f.cell}/${f.caseId} expected ${curlSymptom(f.expected)}, observed ${curlSymptom(f.observed)}`,
  );
  return `${head}; FINDING: ${listed.join('; ')}.`;
}

function scaleLine(tables: NetworkReportTables): string {
  const cells = [...new Set(tables.scale.map((r) => r.cell))];
  const lines = cells.flatMap((cell) => {
    const steps = tables.scale.filter(
      (r): r is ScaleRow & { programmingMedianMs: number } =>
        r.cell === cell && r.programmingMedianMs !== undefined,
    );
    if (steps.length === 0) return [];
    const first = steps[0];
    const last = steps[steps.length - 1];
    const growth =
      last.services > first.services
        ? ` (${times(last.programmingMedianMs / first.programmingMedianMs)})`
        : '';
    const vs =
      tables.baseline.cell !== undefined &&
      cell !== tables.baseline.cell &&
      last.programmingVsBaseline !== undefined
        ? `, ${times(last.programmingVsBaseline)} of ${tables.baseline.cell}`
        : '';
    return [
      `${cell} (${first.datapath}) ${coarseMs(first.programmingMedianMs)} at ${count(first.services)} -> ${coarseMs(last.programmingMedianMs)} at ${count(last.services)}${growth}${vs}`,
    ];
  });
  if (lines.length === 0) return 'New-Service latency (E9): no valid Service scale step.';
  return `New-Service latency (E9, median, fewest -> most Services): ${lines.join('; ')}.`;
}

function conntrackLine(tables: NetworkReportTables): string {
  const cells = [...new Set(tables.conntrack.map((r) => r.cell))];
  const lines = cells.flatMap((cell) => {
    const steps = tables.conntrack.filter((r) => r.cell === cell && r.succeeded !== undefined);
    if (steps.length === 0) return [];
    const smallest = steps.reduce((a, b) => (b.limit < a.limit ? b : a));
    const causes = Object.entries(smallest.failures ?? {})
      .filter(([, n]) => n > 0)
      .map(([cause, n]) => `${count(n)} ${cause}`)
      .join(', ');
    return [
      `${cell} ${count(smallest.succeeded)} of ${count(smallest.connections)} at ${count(smallest.limit)} (expected ${count(smallest.expectedSuccesses)}${causes ? `; failed: ${causes}` : ''})`,
    ];
  });
  if (lines.length === 0) return 'Conntrack table full (E10): no valid step.';
  return `Conntrack table full (E10, connections that succeeded at each cell's smallest valid limit): ${lines.join('; ')}.`;
}

function baselineText(tables: NetworkReportTables): string {
  const b = tables.baseline;
  if (b.cell === undefined) return `No baseline cell: ${b.reason}.`;
  const why = b.how === 'named' ? 'named with --baseline' : `the default: ${DEFAULT_BASELINE_RULE}`;
  return `Baseline cell: ${b.cell} (${b.datapath}, mesh ${b.mesh}; ${why}). Every cell's calibration, Service-scale and conntrack figures are also shown against it; the mesh experiments compare each arm with the plain arm of its own cell.`;
}

export function headlineSection(tables: NetworkReportTables): ReportSection {
  const runs = tables.cells.reduce((n, c) => n + c.runs, 0);
  const valid = tables.cells.reduce((n, c) => n + c.validRuns, 0);
  return {
    id: 'headline',
    title: 'Headline',
    intro:
      `${baselineText(tables)} ${count(valid)} of ${count(runs)} runs valid over ${tables.cells.length} cell(s); ` +
      'only valid runs enter these lines and the tables below.',
    items: [
      sidecarLine(tables),
      attributionLine(tables.attribution),
      mtlsLine(tables),
      scaleLine(tables),
      conntrackLine(tables),
    ],
    notes: [],
    warnings: [
      ...(tables.invalid.length > 0
        ? [`${tables.invalid.length} run record(s) are invalid and left out: see Invalid runs.`]
        : []),
    ],
  };
}
