import type { DoctorReport } from './doctor.ts';
import { doctorPassed } from './doctor.ts';
import type { DoctorStatus } from './model.ts';

/** `lab doctor`'s text and JSON. Pure. */

const MARK: Record<DoctorStatus, string> = { pass: 'PASS', warn: 'WARN', fail: 'FAIL' };

/** One line per check result, its fix indented below it, and a closing verdict. */
export function formatDoctor(report: DoctorReport): string {
  const out = [
    `lab doctor: stack ${report.stackName} (${report.lab} lab), account ${report.account}, region ${report.region}`,
    '',
  ];
  for (const line of report.lines) {
    out.push(`${MARK[line.status]}  ${line.check}  ${line.subject}: ${line.message}`);
    if (line.fix) out.push(`      fix: ${line.fix}`);
  }
  const count = (status: DoctorStatus) => report.lines.filter((line) => line.status === status).length;
  out.push('');
  out.push(
    doctorPassed(report)
      ? `${count('pass')} passed, ${count('warn')} warning(s), no failure: cdk deploy of ${report.stackName} can go ahead in ${report.region}${count('warn') > 0 ? ' (read the warnings first)' : ''}.`
      : `${count('fail')} failure(s), ${count('warn')} warning(s), ${count('pass')} passed: cdk deploy of ${report.stackName} in ${report.region} would fail; fix the FAIL lines first.`,
  );
  return `${out.join('\n')}\n`;
}

/** The report for scripts: every line with its status, and `ok`. */
export function doctorJson(report: DoctorReport): string {
  return `${JSON.stringify({ ...report, ok: doctorPassed(report) }, null, 2)}\n`;
}
