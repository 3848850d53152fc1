import { formatElapsed, type StudyStatus } from '../runner/status.ts';

/**
 * What the study has cost so far and when the host stops (issue 11): `lab status` lines from
 * status.json and the instance's launch time. Pure: numbers in, lines out.
 */

export interface HostClock {
  /** The instance's LaunchTime (EC2 DescribeInstances); undefined when unknown. */
  readonly launchedAt?: Date;
  /** instance.pricePerHourUsd */
  readonly pricePerHourUsd: number;
  /** instance.maxLifetimeHours: the bootstrap's shutdown guard, counted from the launch. */
  readonly maxLifetimeHours: number;
}

/** The study's id, its invalid runs so far, the cost so far and the host's shutdown time. */
export function studyClockLines(status: StudyStatus, host: HostClock, now: Date): string[] {
  const lines: string[] = [];
  if (status.studyId) {
    lines.push(
      `study:     ${status.studyId}${status.studyStartedAt ? `, started ${status.studyStartedAt}` : ''} (results in studies/${status.studyId}/)`,
    );
  }
  if (status.invalidRunIds && status.invalidRunIds.length > 0) {
    lines.push(`invalid:   ${status.invalidRunIds.join(', ')}`);
  }
  if (host.launchedAt) {
    const upMs = Math.max(0, now.getTime() - host.launchedAt.getTime());
    const cost = (upMs / 3_600_000) * host.pricePerHourUsd;
    lines.push(
      `cost:      about ${cost.toFixed(2)} USD so far (instance up ${formatElapsed(upMs)} at ${host.pricePerHourUsd} USD/h)`,
    );
    const shutdown = new Date(host.launchedAt.getTime() + host.maxLifetimeHours * 3_600_000);
    const leftMs = shutdown.getTime() - now.getTime();
    lines.push(
      `shutdown:  ${shutdown.toISOString()} at the latest (instance.maxLifetimeHours ${host.maxLifetimeHours}), ${leftMs > 0 ? `in ${formatElapsed(leftMs)}` : 'due now'}`,
    );
  }
  return lines;
}
