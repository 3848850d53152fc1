import type { ClusterDoctorReport } from './cluster.ts';
import type { DoctorReport } from './doctor.ts';
import { doctorPassed } from './doctor.ts';
import type { DoctorStatus } from './model.ts';

/** `lab doctor`'s text and JSON, for the AWS account and for a cluster. Pure. */

const MARK: Record<DoctorStatus, string> = { pass: 'PASS', warn: 'WARN', fail: 'FAIL' };

interface AnyLine {
  readonly check: string;
  readonly status: DoctorStatus;
  readonly subject: string;
  readonly message: string;
  readonly fix?: string;
}

/** One line per check result, its fix indented below it. */
function lineTexts(lines: readonly AnyLine[]): string[] {
  return lines.flatMap((line) => [
    `${MARK[line.status]}  ${line.check}  ${line.subject}: ${line.message}`,
    ...(line.fix ? [`      fix: ${line.fix}`] : []),
  ]);
}

function counter(lines: readonly AnyLine[]) {
  return (status: DoctorStatus) => lines.filter((line) => line.status === status).length;
}

/** The account's report, and a closing verdict on cdk deploy. */
export function formatDoctor(report: DoctorReport): string {
  const count = counter(report.lines);
  const out = [
    `lab doctor: stack ${report.stackName} (${report.lab} lab), account ${report.account}, region ${report.region}`,
    '',
    ...lineTexts(report.lines),
    '',
    doctorPassed(report)
      ? `${count('pass')} passed, ${count('warn')} warning(s), no failure: cdk deploy of ${report.stackName} can go ahead in ${report.region}${count('warn') > 0 ? ' (read the warnings first)' : ''}.`
      : `${count('fail')} failure(s), ${count('warn')} warning(s), ${count('pass')} passed: cdk deploy of ${report.stackName} in ${report.region} would fail; fix the FAIL lines first.`,
  ];
  return `${out.join('\n')}\n`;
}

/** Whether `lab install` can be expected to get past its checks: no line failed. */
export function clusterDoctorPassed(report: ClusterDoctorReport): boolean {
  return report.lines.every((line) => line.status !== 'fail');
}

/** The cluster's report, and a closing verdict on lab install. */
export function formatClusterDoctor(report: ClusterDoctorReport): string {
  const count = counter(report.lines);
  const out = [
    `lab doctor: the ${report.lab} lab on context ${report.context} (${report.server}), Kubernetes ${report.version}`,
    '',
    ...lineTexts(report.lines),
    '',
    clusterDoctorPassed(report)
      ? `${count('pass')} passed, ${count('warn')} warning(s), no failure: lab install can go ahead on context ${report.context}${count('warn') > 0 ? ' (read the warnings first)' : ''}.`
      : `${count('fail')} failure(s), ${count('warn')} warning(s), ${count('pass')} passed: lab install on context ${report.context} would stop before applying anything; fix the FAIL lines first.`,
  ];
  return `${out.join('\n')}\n`;
}

/** The report for scripts: every line with its status, and `ok`. */
export function doctorJson(report: DoctorReport): string {
  return `${JSON.stringify({ ...report, ok: doctorPassed(report) }, null, 2)}\n`;
}

export function clusterDoctorJson(report: ClusterDoctorReport): string {
  return `${JSON.stringify({ ...report, ok: clusterDoctorPassed(report) }, null, 2)}\n`;
}
