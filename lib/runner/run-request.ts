import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { NEW_STUDY_REQUEST_FILE, REDO_INVALID_REQUEST_FILE, SMOKE_REQUEST_FILE } from './layout.ts';

/**
 * `lab run --new | --redo-invalid | --smoke` on a cluster the user brings: the results claim is
 * not writable from the laptop (its server is read-only), so `lab run` names the request in the
 * runner Job's env, and the runner leaves the same request file the host's `lab run` leaves
 * before it reads its requests. Everything after that is the host's path.
 */
export const RUN_REQUEST_ENV = 'LAB_RUN_REQUEST';

export const RUN_REQUEST_FILES = {
  new: NEW_STUDY_REQUEST_FILE,
  'redo-invalid': REDO_INVALID_REQUEST_FILE,
  smoke: SMOKE_REQUEST_FILE,
} as const;
export type RunRequest = keyof typeof RUN_REQUEST_FILES;

/** Writes the request file `value` names into the results folder; returns its name, if any. */
export async function leaveRunRequest(
  root: string,
  value: string | undefined,
  now: Date,
): Promise<string | undefined> {
  if (value === undefined || value === '') return undefined;
  const file = RUN_REQUEST_FILES[value as RunRequest];
  if (!file) {
    throw new Error(
      `${RUN_REQUEST_ENV}=${value} is not a request (allowed: ${Object.keys(RUN_REQUEST_FILES).join(', ')})`,
    );
  }
  await writeFile(join(root, file), `${now.toISOString()}\n`);
  return file;
}
