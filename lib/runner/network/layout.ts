import { createHash } from 'node:crypto';

/**
 * The network study's files in a cell's results folder (the same folder and study layout as the
 * first lab, lib/runner/layout.ts: `status.json`, `studies/<id>/study.json`, `runner.log`,
 * `runs/<run-id>.json`), plus:
 *
 * ```
 * jobs/<job-name>/<file>             where a network Job writes its output (hostPath, mounted at /out);
 *                                    the runner copies it into the study folder and empties the folder
 * studies/<id>/attempts/<run-id>/<n>/<file>   a run's Job outputs and logs, write-once per attempt
 *                                    (`study` for the study's own Jobs: host facts, datapath); a
 *                                    runner claims a new <n> for every run it starts (file-store.ts)
 * ```
 */

/** Folder of the Jobs' output folders, relative to the results folder. */
export const JOB_OUTPUTS_DIR = 'jobs';
/** Where a network Job's output folder is mounted in its pod. */
export const JOB_OUTPUT_MOUNT = '/out';

/** A Job's output folder, relative to the results folder. */
export function jobOutputDir(jobName: string): string {
  return `${JOB_OUTPUTS_DIR}/${jobName}`;
}

/** Kubernetes object names are DNS labels: at most 63 characters. */
const NAME_MAX = 63;

/**
 * A Job name from its parts (`net-e1-plain-r1`, `net-e2-strict-in-mesh`): lower case, and when
 * longer than a DNS label allows, shortened with a hash of the whole so names stay unique.
 */
export function networkJobName(...parts: readonly (string | number)[]): string {
  const name = ['net', ...parts]
    .join('-')
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .replace(/-$/, '');
  if (name.length <= NAME_MAX) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 8);
  return `${name.slice(0, NAME_MAX - 9).replace(/-$/, '')}-${hash}`;
}
