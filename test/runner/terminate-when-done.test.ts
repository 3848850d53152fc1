import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { uploadChecks } from '../../lib/control/smoke-uploads.ts';
import { RUNNER_LOG_FILE, SMOKE_CHECKLIST_FILE, STATUS_FILE, studyDir } from '../../lib/runner/layout.ts';
import type { SmokeChecklist } from '../../lib/study/smoke-checklist.ts';
import { linkPython3 } from '../host-python.ts';
import { tempDir } from '../temp.ts';

/**
 * runner.terminateWhenDone after a failed smoke study (issue 27): the host's real
 * lab-terminate-when-done.sh, with `shutdown` and the results sync replaced by recorders, ends the
 * host only after the checklist and the runner log are in the bucket, keeps it up while the upload
 * fails, and ends it anyway once the upload has failed for 15 minutes. What the bucket then holds is
 * what `lab status` reads after the host is gone.
 */

const STUDY = '20251014-090000-1a2b3c4d';

const checklist: SmokeChecklist = {
  studyId: STUDY,
  writtenAt: '2025-10-14T09:08:00.000Z',
  passed: false,
  entries: [],
};

interface Host {
  readonly results: string;
  readonly bucket: string;
  readonly events: string;
  readonly marker: string;
  /** Runs the script once (a minute of its timer); the events so far. */
  tick(): string[];
}

/** A host whose smoke study finished with a failed proof; the sync copies into `bucket` (or fails). */
function host(syncWorks: () => boolean): Host {
  const dir = tempDir('terminate-when-done-');
  const results = join(dir, 'results');
  const bucket = join(dir, 'bucket');
  const events = join(dir, 'events');
  const marker = join(dir, 'retry-marker');
  const study = join(results, studyDir(STUDY));
  mkdirSync(study, { recursive: true });
  mkdirSync(bucket);
  writeFileSync(join(study, SMOKE_CHECKLIST_FILE), JSON.stringify(checklist));
  writeFileSync(join(study, RUNNER_LOG_FILE), 'smoke checklist ... FAILED\n');
  writeFileSync(
    join(results, STATUS_FILE),
    JSON.stringify({ state: 'finished', profile: 'smoke', studyId: STUDY, checklist }),
  );
  // shutdown notes which of the two files the bucket held when it was called.
  const shutdown = [
    '#!/bin/bash',
    `for f in ${SMOKE_CHECKLIST_FILE} ${RUNNER_LOG_FILE}; do`,
    `  if [ -f '${bucket}/${studyDir(STUDY)}/'$f ]; then have="$have $f"; fi`,
    'done',
    `echo "shutdown$have" >> '${events}'`,
  ].join('\n');
  writeFileSync(join(dir, 'shutdown'), `${shutdown}\n`);
  chmodSync(join(dir, 'shutdown'), 0o755);
  linkPython3(dir);
  const settings = join(dir, 'settings.env');
  writeFileSync(
    settings,
    [
      `STATUS_FILE=${join(results, STATUS_FILE)}`,
      `LOG_FILE=${join(dir, 'log')}`,
      `SYNC_SCRIPT=${join(dir, 'sync')}`,
      `TERMINATE_RETRY_MARKER=${marker}`,
    ].join('\n'),
  );
  return {
    results,
    bucket,
    events,
    marker,
    tick() {
      const ok = syncWorks();
      writeFileSync(
        join(dir, 'sync'),
        ok
          ? `#!/bin/bash\ncp -r '${results}/.' '${bucket}/'\necho sync >> '${events}'\n`
          : `#!/bin/bash\necho sync-failed >> '${events}'\nexit 1\n`,
      );
      chmodSync(join(dir, 'sync'), 0o755);
      const run = spawnSync('bash', ['lib/aws/bootstrap/sh/host/lab-terminate-when-done.sh'], {
        env: { ...process.env, LAB_SETTINGS: settings, PATH: `${dir}:${process.env.PATH}` },
        encoding: 'utf8',
      });
      expect(run.status, run.stderr).toBe(0);
      return existsSync(events) ? readFileSync(events, 'utf8').trim().split('\n') : [];
    },
  };
}

describe('runner.terminateWhenDone after a failed smoke study', () => {
  it('ends the host only after the checklist and the runner log are in the bucket, which lab status then reads', () => {
    const h = host(() => true);
    expect(h.tick()).toEqual(['sync', `shutdown ${SMOKE_CHECKLIST_FILE} ${RUNNER_LOG_FILE}`]);
    // lab status, the instance gone: both uploads pass from the bucket's objects.
    const folder = join(h.bucket, studyDir(STUDY));
    const listed = [SMOKE_CHECKLIST_FILE, RUNNER_LOG_FILE].map((path) => ({
      key: `LlmGatewayLab/${studyDir(STUDY)}/${path}`,
      path,
      size: statSync(join(folder, path)).size,
      // S3's LastModified: the upload, after the checklist was written.
      lastModified: new Date('2025-10-14T09:09:00.000Z'),
    }));
    expect(uploadChecks(checklist, listed, 's3://bucket/LlmGatewayLab/', false).map((c) => c.status)).toEqual(
      ['pass', 'pass'],
    );
  });

  it('keeps the host up while the upload fails, tries each minute, and ends it after 15 minutes of failures', () => {
    let works = false;
    const h = host(() => works);
    expect(h.tick()).toEqual(['sync-failed']);
    expect(h.tick()).toEqual(['sync-failed', 'sync-failed']);
    // The upload comes back: uploaded first, then the shutdown.
    works = true;
    expect(h.tick()).toEqual([
      'sync-failed',
      'sync-failed',
      'sync',
      `shutdown ${SMOKE_CHECKLIST_FILE} ${RUNNER_LOG_FILE}`,
    ]);
    expect(existsSync(h.marker)).toBe(false);

    // A bucket that stays unreachable: after 15 minutes of failures the host ends anyway.
    const stuck = host(() => false);
    expect(stuck.tick()).toEqual(['sync-failed']);
    writeFileSync(stuck.marker, String(Math.floor(Date.now() / 1000) - 15 * 60));
    expect(stuck.tick()).toEqual(['sync-failed', 'sync-failed', 'shutdown']);
  });
});
