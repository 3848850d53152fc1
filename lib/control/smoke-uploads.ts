import { RUNNER_LOG_FILE, SMOKE_CHECKLIST_FILE, studyDir } from '../runner/layout.ts';
import { type AnyChecklist, formatChecklist, type HostCheck } from '../study/smoke-checklist.ts';
import type { ControlContext } from './context.ts';
import { listResults, type ResultObject } from './download.ts';
import type { Testbed } from './testbed.ts';

/**
 * The two proofs of a smoke study the runner cannot see: its results and its log reached the
 * results bucket. The host's sync (`lab-sync-results`, every 5 minutes and at shutdown) uploads
 * the results folder; `lab status` looks for the smoke study's files under the stack's prefix.
 */

const UPLOAD_FIX_GONE =
  "the host's upload (lab-sync-results) did not run before the instance ended: the instance role needs s3:PutObject on the results bucket, and /var/log/lab-bootstrap.log of a new deploy shows the sync's errors";

/** The upload checks from the objects under the smoke study's prefix (`listed`), or the listing's error. */
export function uploadChecks(
  checklist: AnyChecklist,
  listed: readonly ResultObject[] | { readonly error: string },
  where: string,
  hostRunning: boolean,
): HostCheck[] {
  const files: [string, string][] = [
    ['results uploaded to S3', SMOKE_CHECKLIST_FILE],
    ['runner log uploaded to S3', RUNNER_LOG_FILE],
  ];
  if ('error' in listed) {
    return files.map(([check]) => ({
      check,
      status: 'fail',
      evidence: `not checked: ${listed.error}`,
      fix: 'lab status needs s3:ListBucket on the results bucket',
    }));
  }
  const written = Date.parse(checklist.writtenAt);
  return files.map(([check, name]): HostCheck => {
    const object = listed.find((o) => o.path === name);
    // The log's last lines come after the checklist; a copy from before it is an earlier upload.
    if (object && object.lastModified.getTime() >= written)
      return {
        check,
        status: 'pass',
        evidence: `${where}${name} uploaded ${object.lastModified.toISOString()}`,
      };
    const seen = object
      ? `only a copy from ${object.lastModified.toISOString()}, before the checklist`
      : 'not there yet';
    return hostRunning
      ? {
          check,
          status: 'pending',
          evidence: `${where}${name}: ${seen}; the host uploads every 5 minutes and at shutdown (lab results uploads now)`,
        }
      : {
          check,
          status: 'fail',
          evidence: `${where}${name}: ${seen}, and the instance is gone`,
          fix: UPLOAD_FIX_GONE,
        };
  });
}

/** The checklist's lines for `lab status`, with the upload checks looked up in the results bucket. */
export async function checklistLines(
  ctx: ControlContext,
  testbed: Pick<Testbed, 'bucket' | 'prefix'>,
  checklist: AnyChecklist,
  hostRunning: boolean,
): Promise<string[]> {
  const prefix = `${testbed.prefix}${studyDir(checklist.studyId)}/`;
  const listed = await listResults(ctx, testbed.bucket, prefix).catch((error: unknown) => ({
    error: (error as Error).message,
  }));
  const host = uploadChecks(checklist, listed, `s3://${testbed.bucket}/${prefix}`, hostRunning);
  return formatChecklist({ ...checklist, host });
}
