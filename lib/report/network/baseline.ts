import type { NetworkStudyRecord } from '../../network/study/model.ts';
import type { BaselineChoice, CalibrationRow, ConntrackRow, ScaleRow } from './table-rows.ts';

/**
 * The network report's baseline cell: every cell's calibration, Service-scale and conntrack
 * figures are also shown against it, so a reader compares with a named cell, never with whichever
 * cell happens to come first. Pure.
 */

/** The default rule, in the report's words. */
export const DEFAULT_BASELINE_RULE =
  "the cell that runs kube-proxy's iptables mode without a mesh (Kubernetes' default datapath; dp-iptables in the default configuration)";

/** A `--baseline` that names no cell of the report. */
export class BaselineError extends Error {
  override readonly name = 'BaselineError';
}

/**
 * The baseline: the cell named by `requested`, else the one cell that fits `DEFAULT_BASELINE_RULE`.
 * With none or several fitting, there is no baseline and the reason says how to name one; a
 * requested cell that the report does not hold is an error naming the cells it does.
 */
export function chooseBaseline(studies: readonly NetworkStudyRecord[], requested?: string): BaselineChoice {
  const cells = studies.map((s) => s.cell);
  if (requested !== undefined) {
    const study = studies.find((s) => s.cell === requested);
    if (!study) {
      throw new BaselineError(
        `--baseline ${JSON.stringify(requested)} is not a cell of this report; choose one of: ${cells.join(', ') || '(no cell)'}`,
      );
    }
    return { cell: study.cell, datapath: study.datapath, mesh: study.mesh, how: 'named' };
  }
  const fitting = studies.filter((s) => s.datapath === 'iptables' && s.mesh === 'none');
  if (fitting.length === 1) {
    const [study] = fitting;
    return { cell: study.cell, datapath: study.datapath, mesh: study.mesh, how: 'default' };
  }
  const why =
    fitting.length === 0
      ? 'no cell runs kube-proxy iptables without a mesh'
      : `${fitting.map((s) => s.cell).join(' and ')} all run kube-proxy iptables without a mesh`;
  return {
    reason: `${why}, so no default baseline; name one with lab report --baseline <cell> (cells: ${cells.join(', ')})`,
  };
}

const ratio = (value: number | undefined, base: number | undefined): number | undefined =>
  value === undefined || base === undefined || base === 0 ? undefined : value / base;

/** Calibration rows with their ratio and difference to the baseline cell's mean. */
export function calibrationVsBaseline(
  rows: readonly CalibrationRow[],
  baseline: BaselineChoice,
): CalibrationRow[] {
  const base = rows.find((r) => r.cell === baseline.cell)?.summary?.meanMs;
  return rows.map((row) => {
    const mean = row.summary?.meanMs;
    const vs = ratio(mean, base);
    return {
      ...row,
      ...(vs === undefined ? {} : { vsBaseline: vs }),
      ...(mean === undefined || base === undefined ? {} : { diffVsBaselineMs: mean - base }),
    };
  });
}

/** Service-scale rows with their ratios to the baseline cell's step of the same Service count. */
export function scaleVsBaseline(rows: readonly ScaleRow[], baseline: BaselineChoice): ScaleRow[] {
  return rows.map((row) => {
    const base = rows.find((r) => r.cell === baseline.cell && r.services === row.services);
    if (!base) return row;
    const programming = ratio(row.programmingMedianMs, base.programmingMedianMs);
    const newConnection = ratio(row.newConnection?.meanMs, base.newConnection?.meanMs);
    const entries = ratio(row.entries, base.entries);
    return {
      ...row,
      ...(programming === undefined ? {} : { programmingVsBaseline: programming }),
      ...(newConnection === undefined ? {} : { newConnectionVsBaseline: newConnection }),
      ...(entries === undefined ? {} : { entriesVsBaseline: entries }),
    };
  });
}

/** Conntrack rows with their successes against the baseline cell's at the same requested limit. */
export function conntrackVsBaseline(rows: readonly ConntrackRow[], baseline: BaselineChoice): ConntrackRow[] {
  return rows.map((row) => {
    const base = rows.find((r) => r.cell === baseline.cell && r.requestedLimit === row.requestedLimit);
    if (base?.succeeded === undefined || row.succeeded === undefined) return row;
    return { ...row, succeededVsBaseline: row.succeeded - base.succeeded };
  });
}
