import { chmodSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { parseLabConfig } from '../../../lib/config/load.ts';
import { fakeCommand, makeSandbox, pathWithout } from './sandbox.ts';

/**
 * Races of the host's shell programs (issue 27's audit), each forced into its bad interleaving by a
 * fake that blocks on a fifo until the test lets it go: no test here depends on timing luck.
 */

const LOG_KEY = 'results-bucket/Lab/host/bootstrap.log';

describe('uploads of the same object', () => {
  // The log timer's upload copies the log, and its PutObject is answered late (a slow S3); the
  // final upload (the deadline's, or the failed bootstrap's) copies the longer log meanwhile and
  // lands first. S3 keeps the last PutObject to arrive: the older, shorter log, and the host then
  // ends. The fake curl holds the first PUT of the log until the test writes to a fifo, which it
  // does once the second upload has ended or says it waits for the first.
  test('a later upload lands last: the final log is never replaced by an older copy', () => {
    const box = makeSandbox();
    box.writeBootstrap(parseLabConfig({}), { AWS_RETRY_SECONDS: '0' });
    mkdirSync(box.path('/opt/lab'), { recursive: true });
    rmSync(join(box.root, 'bin', 'aws'));
    renameSync(join(box.root, 'bin', 'curl'), join(box.root, 'bin', 'curl-real'));
    writeFileSync(
      join(box.root, 'bin', 'curl'),
      fakeCommand(
        [
          'if [[ " $* " == *" -X PUT "* && "$*" == *bootstrap.log ]] && mv "$SANDBOX/hold" "$SANDBOX/held" 2>/dev/null; then',
          '  read -r _ <"$SANDBOX/release"',
          'fi',
          'exec curl-real "$@"',
        ].join('\n'),
      ),
    );
    chmodSync(join(box.root, 'bin', 'curl'), 0o755);
    const put = `bash '${join(box.bootstrapDir, 'host', 'lab-aws.sh')}' put "$log" s3://${LOG_KEY}`;
    const result = box.run(
      [
        'log=$SANDBOX/bootstrap.log',
        'mkfifo "$SANDBOX/release"',
        ': >"$SANDBOX/hold"',
        'printf \'line 1\\n\' >"$log"',
        // The timer's upload: its copy holds line 1, and its PUT waits.
        `${put} 2>"$SANDBOX/timer.err" &`,
        'timer=$!',
        'until [ -e "$SANDBOX/held" ]; do sleep 0.05; done',
        'printf \'line 2\\n\' >>"$log"',
        // The final upload, of the longer log.
        `${put} 2>"$SANDBOX/final.err" &`,
        'final=$!',
        'while kill -0 "$final" 2>/dev/null && ! grep -q "waiting for the upload in flight" "$SANDBOX/final.err"; do sleep 0.05; done',
        'echo go >"$SANDBOX/release"',
        'wait "$timer"; echo "timer $?"',
        'wait "$final"; echo "final $?"',
      ].join('\n'),
      {
        PATH: pathWithout('aws', box),
        LAB_REGION: 'us-west-2',
        LAB_SETTINGS: join(box.bootstrapDir, 'settings.env'),
      },
    );
    expect(result.stdout, result.stderr).toBe('timer 0\nfinal 0\n');
    expect(box.awsRequests()).toEqual([`PUT ${LOG_KEY}`, `PUT ${LOG_KEY}`]);
    expect(box.s3Object(LOG_KEY)).toBe('line 1\nline 2\n');
  });
});
