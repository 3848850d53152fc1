import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { bootstrapSteps, renderSettings } from '../../../lib/aws/bootstrap/bootstrap.ts';
import { defaults, whenDone } from './rehearse.ts';
import { makeSandbox } from './sandbox.ts';

describe('runner.terminateWhenDone', () => {
  test('step 1 says so; the default installs no watcher', () => {
    expect(bootstrapSteps(whenDone)[0]?.title).toBe(
      'arm the cost guard: shut down in 480 min (instance.maxLifetimeHours 8), results to S3; terminate when the study is done (runner.terminateWhenDone)',
    );
    expect(renderSettings(whenDone)).toContain('TERMINATE_WHEN_DONE=1');
    expect(renderSettings(defaults)).toContain('TERMINATE_WHEN_DONE=0');
  });

  // The bootstrap installing the watcher and its timer: bootstrap.test.ts, which reads a run it
  // shares with other tests (bumpyRehearsal).

  /** Runs the watcher (host/lab-terminate-when-done.sh itself) once with the given status.json. */
  function watch(status?: Record<string, unknown>, sync = 'exit 0', settings: Record<string, string> = {}) {
    const box = makeSandbox();
    box.writeBootstrap(whenDone, settings);
    if (status) {
      mkdirSync(box.path('/var/lib/lab/results'), { recursive: true });
      writeFileSync(box.path('/var/lib/lab/results/status.json'), JSON.stringify(status));
    }
    box.fake('/usr/local/sbin/lab-sync-results', sync);
    const result = box.runFile(join(box.bootstrapDir, 'host', 'lab-terminate-when-done.sh'), {
      LAB_SETTINGS: join(box.bootstrapDir, 'settings.env'),
    });
    return { box, result, calls: box.calls() };
  }

  test.each(['finished', 'failed'])('a %s study: results uploaded, then the host shuts down', (state) => {
    const { result, calls, box } = watch({ state, totalRuns: 25 });
    expect(result.status).toBe(0);
    expect(calls).toEqual([
      'lab-sync-results ',
      `shutdown -h now lab study ${state} (runner.terminateWhenDone): results uploaded, terminating`,
    ]);
    expect(box.log()).toContain(`the study is ${state} (runner.terminateWhenDone): uploading the results`);
  });

  test.each([
    ['no status.json yet', undefined],
    ['a running study', { state: 'running' }],
    ['a starting study', { state: 'starting' }],
  ])('%s: nothing happens', (_, status) => {
    const { result, calls } = watch(status);
    expect(result.status).toBe(0);
    expect(calls).toEqual([]);
  });

  test('a failed upload keeps the host up to try again (the checklist and log reach S3 first; test/runner/terminate-when-done.test.ts)', () => {
    const { result, calls, box } = watch({ state: 'finished' }, 'exit 1');
    expect(result.status).toBe(0);
    expect(calls.map((c) => c.trim())).toEqual(['lab-sync-results']);
    expect(box.log()).toContain('the results upload failed: the host stays up and tries again in a minute');
  });

  // set -e ended the watcher at its first log line when tee could not write (a full disk), every
  // minute, before the upload and the shutdown: the host ran on until its deadline. /dev/full
  // fails every write, as a full disk does.
  test('on a full disk a finished study still ends the host', () => {
    const { result, calls } = watch({ state: 'finished' }, 'exit 0', { LOG_FILE: '/dev/full' });
    expect(result.stderr).toContain('No space left on device');
    expect(result.status).toBe(0);
    expect(calls).toEqual([
      'lab-sync-results ',
      'shutdown -h now lab study finished (runner.terminateWhenDone): results uploaded, terminating',
    ]);
  });
});
