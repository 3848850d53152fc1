import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, test } from 'vitest';
import { parseLabConfig } from '../../../lib/config/load.ts';
import { fakeCommand, makeSandbox, pathWithout, type Sandbox } from './sandbox.ts';

/**
 * host/lab-aws.sh on its own, against the sandbox's fake curl, metadata service, S3 and Secrets
 * Manager (test/aws/bootstrap/fake_aws.py): retries, refusals, the incremental sync and the
 * handling of the role's keys. No AWS CLI on the PATH.
 */

const ROLE_SECRETS = ['fake/secret+key-never-logged', 'fake-session-token-never-logged'];
const SECRET_ID = 'arn:aws:secretsmanager:us-west-2:123456789012:secret:ClusterAgentToken-AbCdEf';

let box: Sandbox;
beforeEach(() => {
  box = makeSandbox();
  box.writeBootstrap(parseLabConfig({}), { AWS_RETRY_SECONDS: '0', AWS_ATTEMPTS: '3' });
  mkdirSync(box.path('/opt/lab'), { recursive: true });
  rmSync(join(box.root, 'bin', 'aws'));
});

function labAws(args: string[], env: Record<string, string> = {}) {
  const quoted = args.map((a) => `'${a}'`).join(' ');
  const file = join(box.root, 'run-lab-aws.sh');
  writeFileSync(file, `exec bash '${join(box.bootstrapDir, 'host', 'lab-aws.sh')}' ${quoted}\n`);
  return box.runFile(file, {
    PATH: pathWithout('aws', box),
    LAB_REGION: 'us-west-2',
    LAB_SETTINGS: join(box.bootstrapDir, 'settings.env'),
    ...env,
  });
}

/** The role's keys never on a command line or in what lab-aws prints; its config files private and gone. */
function expectKeysKept(output: string) {
  for (const secret of ROLE_SECRETS) {
    expect(box.calls().join('\n')).not.toContain(secret);
    expect(output).not.toContain(secret);
  }
  for (const file of box.curlConfigFiles()) {
    expect(file.mode).toBe('600');
    expect(existsSync(file.path)).toBe(false);
  }
}

describe('lab-aws put', () => {
  test('rides out a 503 and a lost connection, then stores the object with its real SHA-256', () => {
    const file = join(box.root, 'report one.json');
    writeFileSync(file, '{"ok":true}');
    const result = labAws(['put', file, 's3://results-bucket/Lab/dir/report one.json'], {
      FAKE_AWS_ANSWERS: '503,000',
    });
    expect(result.status, result.stderr).toBe(0);
    expect(box.awsRequests()).toEqual([
      'PUT results-bucket/Lab/dir/report one.json',
      'PUT results-bucket/Lab/dir/report one.json',
      'PUT results-bucket/Lab/dir/report one.json',
    ]);
    expect(result.stderr).toContain('HTTP 503 InternalError');
    expect(result.stderr).toContain('trying again (2 of 3)');
    expect(box.s3Object('results-bucket/Lab/dir/report one.json')).toBe('{"ok":true}');
    // The key is URI-encoded in the request, as S3 reads it.
    expect(box.calls().some((c) => c.endsWith('amazonaws.com/Lab/dir/report%20one.json'))).toBe(true);
    // Each try hands curl the keys in a config file: 3 requests, 3 config files. The keys are read
    // from the metadata service once (token, role, keys), then kept (docs/facts.md §2.9).
    expect(box.curlConfigFiles()).toHaveLength(3);
    expect(box.calls().filter((c) => c.includes('169.254.169.254'))).toHaveLength(3);
    expectKeysKept(result.stdout + result.stderr);
  });

  // The hash was taken from the file and curl read the file again: a line written in between (the
  // bootstrap's log while its timer uploads it) made the body differ from its hash, and S3 refused
  // it. A sha256sum that lets the file grow right after it read it forces that interleaving.
  test('a file that grows while it is uploaded is stored as it was when the upload began', () => {
    const file = join(box.root, 'bootstrap.log');
    writeFileSync(file, 'line 1\n');
    writeFileSync(
      join(box.root, 'bin', 'sha256sum'),
      fakeCommand(
        `/usr/bin/sha256sum "$@"; rc=$?\nif [ ! -e "$SANDBOX/grew" ]; then touch "$SANDBOX/grew"; echo 'line 2' >>"${file}"; fi\nexit $rc`,
      ),
    );
    chmodSync(join(box.root, 'bin', 'sha256sum'), 0o755);
    const result = labAws(['put', file, 's3://results-bucket/Lab/host/bootstrap.log']);
    expect(result.status, result.stderr).toBe(0);
    expect(readFileSync(file, 'utf8')).toBe('line 1\nline 2\n');
    expect(box.s3Object('results-bucket/Lab/host/bootstrap.log')).toBe('line 1\n');
    expectKeysKept(result.stdout + result.stderr);
  });

  test('a 403 fails at once with what S3 said', () => {
    const file = join(box.root, 'log');
    writeFileSync(file, 'x');
    const result = labAws(['put', file, 's3://results-bucket/Lab/log'], { FAKE_S3_PUT_DENIED: '1' });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(
      'lab-aws: PutObject s3://results-bucket/Lab/log: HTTP 403 AccessDenied: Access Denied',
    );
    expect(box.awsRequests()).toHaveLength(1);
    expectKeysKept(result.stdout + result.stderr);
  });

  test('a 5xx on every try gives up after AWS_ATTEMPTS', () => {
    const file = join(box.root, 'log');
    writeFileSync(file, 'x');
    const result = labAws(['put', file, 's3://results-bucket/Lab/log'], {
      FAKE_AWS_ANSWERS: '500,502,503,200',
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('PutObject s3://results-bucket/Lab/log: HTTP 503 InternalError');
    expect(result.stderr).toContain('(after 3 attempts)');
    expect(box.s3Object('results-bucket/Lab/log')).toBeUndefined();
  });
});

describe("the role's keys between calls (docs/facts.md §2.9)", () => {
  /** The fake metadata service's keys expire at 2030-01-01T00:00:00Z. */
  const EXPIRES = 1_893_456_000;
  const CURRENT = `${EXPIRES} ASIAFAKEKEYID ${ROLE_SECRETS.join(' ')}\n`;
  const cacheDir = () => box.path('/run/lab-aws');
  const cacheFile = () => join(cacheDir(), 'keys');
  const metadataReads = () => box.calls().filter((c) => c.includes('169.254.169.254')).length;
  const put = (env: Record<string, string> = {}) => {
    const file = join(box.root, 'log');
    writeFileSync(file, 'x');
    return labAws(['put', file, 's3://results-bucket/Lab/log'], env);
  };
  /** A cache as an earlier call left it (the folder mode 700, the file 600). */
  const seed = (text: string) => {
    mkdirSync(cacheDir(), { recursive: true, mode: 0o700 });
    writeFileSync(cacheFile(), text, { mode: 0o600 });
  };

  test('read once from the metadata service, then from a root-only cache', () => {
    expect(put().status).toBe(0);
    // A session token, the role, its keys.
    expect(metadataReads()).toBe(3);
    expect(statSync(cacheDir()).mode & 0o777).toBe(0o700);
    expect(statSync(cacheFile()).mode & 0o777).toBe(0o600);
    expect(readFileSync(cacheFile(), 'utf8')).toBe(CURRENT);
    const get = labAws(['get', 's3://results-bucket/Lab/log', '-']);
    expect(get.status, get.stderr).toBe(0);
    expect(get.stdout).toBe('x');
    expect(metadataReads()).toBe(3);
    expect(box.awsRequests()).toEqual(['PUT results-bucket/Lab/log', 'GET results-bucket/Lab/log']);
    expectKeysKept(get.stdout + get.stderr);
  });

  test('keys within five minutes of their expiry, or a cache cut short or malformed, are read again', () => {
    const soon = Math.floor(Date.now() / 1000) + 200;
    for (const text of [
      `${soon} ASIAOLDKEYID old/secret old-token\n`,
      `${EXPIRES} ASIAFAKEKEYID ${ROLE_SECRETS[0]}\n`,
      `${EXPIRES} ASIAFAKEKEYID "quoted" ${ROLE_SECRETS[1]}\n`,
      `soon ASIAFAKEKEYID ${ROLE_SECRETS.join(' ')}\n`,
      '\u0000\u0001garbage',
    ]) {
      seed(text);
      const before = metadataReads();
      const result = put();
      expect(result.status, `${text}: ${result.stderr}`).toBe(0);
      expect(metadataReads() - before, text).toBe(3);
      expect(readFileSync(cacheFile(), 'utf8')).toBe(CURRENT);
    }
    // A link in place of the file is not read.
    rmSync(cacheFile());
    writeFileSync(join(box.root, 'elsewhere'), `${EXPIRES} ASIAOTHERKEY other/secret other-token\n`);
    symlinkSync(join(box.root, 'elsewhere'), cacheFile());
    expect(put().status).toBe(0);
    expect(lstatSync(cacheFile()).isSymbolicLink()).toBe(false);
    expect(readFileSync(cacheFile(), 'utf8')).toBe(CURRENT);
    // Replaced, not written through.
    expect(readFileSync(join(box.root, 'elsewhere'), 'utf8')).toContain('ASIAOTHERKEY');
  });

  test('cached keys a service refuses as expired or unknown are read again, and the request tried once more', () => {
    // Keys the service does not know (rotated away): Secrets Manager's UnrecognizedClientException.
    seed(`${EXPIRES} ASIAOLDKEYID old/secret old-token\n`);
    const file = join(box.root, 'agent-token');
    const secret = labAws(['secret', SECRET_ID, file]);
    expect(secret.status, secret.stderr).toBe(0);
    expect(secret.stderr).toContain(
      `GetSecretValue ${SECRET_ID}: HTTP 400 UnrecognizedClientException: The security token included in the request is invalid., with the cached keys: trying once more with keys read again`,
    );
    expect(readFileSync(file, 'utf8')).toBe('fake-agent-token');
    expect(box.awsRequests()).toHaveLength(2);
    expect(metadataReads()).toBe(3);
    expect(readFileSync(cacheFile(), 'utf8')).toBe(CURRENT);
    // S3's ExpiredToken: once more with keys read again, which S3 takes.
    const once = put({ FAKE_AWS_ANSWERS: '400E' });
    expect(once.status, once.stderr).toBe(0);
    expect(once.stderr).toContain(
      'HTTP 400 ExpiredToken: The provided token has expired., with the cached keys',
    );
    expect(metadataReads()).toBe(6);
    // Only once: keys just read that S3 refuses fail the call, as any refusal does.
    rmSync(join(box.root, 'aws-answers-used'));
    const twice = put({ FAKE_AWS_ANSWERS: '400E,400E' });
    expect(twice.status).toBe(1);
    expect(twice.stderr).toContain(
      'lab-aws: PutObject s3://results-bucket/Lab/log: HTTP 400 ExpiredToken: The provided token has expired.\n',
    );
    expect(box.awsRequests()).toHaveLength(6);
    // Keys read from the metadata service are not tried again: a refusal fails at once.
    rmSync(cacheFile());
    rmSync(join(box.root, 'aws-answers-used'));
    const fresh = put({ FAKE_AWS_ANSWERS: '400E' });
    expect(fresh.status).toBe(1);
    expect(box.awsRequests()).toHaveLength(7);
    expectKeysKept(secret.stderr + once.stderr + twice.stderr + fresh.stderr);
  });
});

// helpers.sh's last uploads of a bootstrap (its end, or its failure): the results sync puts the
// log's copy at the log's own key, so the log is put on its own only without a sync or after one
// that failed.
describe('the bootstrap log at the end: upload_log_and_results', () => {
  const LOG = 'results-bucket/Lab/host/bootstrap.log';
  const finalUploads = (sync: string | undefined) => {
    const syncScript = join(box.root, 'fake-sync');
    if (sync !== undefined) {
      writeFileSync(syncScript, fakeCommand(sync));
      chmodSync(syncScript, 0o755);
    }
    mkdirSync(box.path('/var/log'), { recursive: true });
    writeFileSync(box.path('/var/log/lab-bootstrap.log'), 'step 4 failed\n');
    return box.run(
      [
        `BOOTSTRAP_DIR='${box.bootstrapDir}'`,
        'source "$BOOTSTRAP_DIR/settings.env"',
        'source "$BOOTSTRAP_DIR/helpers.sh"',
        `LAB_RESULTS_BUCKET=results-bucket LAB_STACK_NAME=Lab SYNC_SCRIPT='${syncScript}'`,
        'set_log_location',
        'upload_log_and_results >>"$LOG_FILE" 2>&1',
      ].join('\n'),
      { PATH: pathWithout('aws', box), LAB_REGION: 'us-west-2' },
    );
  };

  test('a sync that succeeds carries the log: no upload of its own', () => {
    expect(finalUploads('exit 0').status).toBe(0);
    expect(box.calls().filter((c) => c.startsWith('fake-sync'))).toHaveLength(1);
    expect(readFileSync(box.path('/var/lib/lab/results/host/bootstrap.log'), 'utf8')).toBe('step 4 failed\n');
    expect(box.awsRequests()).toEqual([]);
  });

  test('without a sync program, or after a sync that failed, the log is put on its own', () => {
    expect(finalUploads(undefined).status).toBe(0);
    expect(box.awsRequests()).toEqual([`PUT ${LOG}`]);
    expect(finalUploads('exit 1').status).toBe(0);
    expect(box.awsRequests()).toEqual([`PUT ${LOG}`, `PUT ${LOG}`]);
    expect(box.s3Object(LOG)).toContain('results upload failed; the timer and the shutdown hook retry');
  });
});

describe('lab-aws sync-up', () => {
  test('puts new and changed files only, and retries a file that failed on the next run', () => {
    const results = box.path('/var/lib/lab/results');
    mkdirSync(join(results, 'studies/s-1'), { recursive: true });
    writeFileSync(join(results, 'status.json'), '{"state":"running"}');
    writeFileSync(join(results, 'studies/s-1/study.json'), '{"id":"s-1"}');
    const sync = (env: Record<string, string> = {}) =>
      labAws(['sync-up', `${results}/`, 's3://results-bucket/Lab/cell/'], env);

    expect(sync().status).toBe(0);
    expect(box.awsRequests().sort()).toEqual([
      'PUT results-bucket/Lab/cell/status.json',
      'PUT results-bucket/Lab/cell/studies/s-1/study.json',
    ]);
    // Nothing changed: no request at all.
    expect(sync().status).toBe(0);
    expect(box.awsRequests()).toHaveLength(2);

    // status.json changes; a new file is refused once.
    writeFileSync(join(results, 'status.json'), '{"state":"finished"}');
    utimesSync(join(results, 'status.json'), new Date(), new Date(Date.now() + 5_000));
    writeFileSync(join(results, 'studies/s-1/run.json'), '{"run":1}');
    const refused = sync({ FAKE_S3_PUT_DENIED: '1' });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain('2 file(s) not uploaded (0 uploaded)');
    expect(sync().status).toBe(0);
    expect(box.s3Object('results-bucket/Lab/cell/status.json')).toBe('{"state":"finished"}');
    expect(box.s3Object('results-bucket/Lab/cell/studies/s-1/run.json')).toBe('{"run":1}');
    expect(box.awsRequests().slice(4).sort()).toEqual([
      'PUT results-bucket/Lab/cell/status.json',
      'PUT results-bucket/Lab/cell/studies/s-1/run.json',
    ]);
  });

  // The runner writes status.json through a temporary file renamed into place every few seconds: a
  // listing that caught the temporary file found it gone at its upload, and the whole sync failed
  // ("1 file(s) not uploaded"), as did lab results. A cp that sees the rename happen first forces it.
  test('a file renamed away between the listing and its upload is no failure', () => {
    const results = box.path('/var/lib/lab/results');
    mkdirSync(results, { recursive: true });
    writeFileSync(join(results, 'status.json.tmp-7-1'), '{"state":"running"}');
    writeFileSync(join(results, 'study.json'), '{"id":"s-1"}');
    writeFileSync(
      join(box.root, 'bin', 'cp'),
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion, not a template
      fakeCommand('case "$2" in *.tmp-*) mv "$2" "${2%.tmp-*}" ;; esac\nexec /bin/cp "$@"'),
    );
    chmodSync(join(box.root, 'bin', 'cp'), 0o755);
    const result = labAws(['sync-up', `${results}/`, 's3://results-bucket/Lab/cell/']);
    expect(result.status, result.stderr).toBe(0);
    expect(box.awsRequests()).toEqual(['PUT results-bucket/Lab/cell/study.json']);
    // Its final name is new to the record: the next sync uploads it.
    expect(labAws(['sync-up', `${results}/`, 's3://results-bucket/Lab/cell/']).status).toBe(0);
    expect(box.s3Object('results-bucket/Lab/cell/status.json')).toBe('{"state":"running"}');
  });

  // Two syncs at once (the 5-minute timer and the deadline's, or lab results) wrote their record
  // of what was sent through one shared name: the second to rename it found it gone, and its
  // whole sync failed. An mv that lets a second sync run to its end first forces that.
  test('two syncs at once both succeed', () => {
    const results = box.path('/var/lib/lab/results');
    mkdirSync(results, { recursive: true });
    writeFileSync(join(results, 'study.json'), '{"id":"s-1"}');
    const args = `sync-up '${results}/' s3://results-bucket/Lab/cell/`;
    writeFileSync(
      join(box.root, 'bin', 'mv'),
      fakeCommand(
        `if [ ! -e "$SANDBOX/second" ]; then touch "$SANDBOX/second"; bash '${join(box.bootstrapDir, 'host', 'lab-aws.sh')}' ${args} || echo "second sync failed" >&2; fi\nexec /bin/mv "$@"`,
      ),
    );
    chmodSync(join(box.root, 'bin', 'mv'), 0o755);
    const result = labAws(['sync-up', `${results}/`, 's3://results-bucket/Lab/cell/']);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).not.toContain('second sync failed');
    expect(box.awsRequests()).toEqual([
      'PUT results-bucket/Lab/cell/study.json',
      'PUT results-bucket/Lab/cell/study.json',
    ]);
  });
});

describe('lab-aws get and sync-down', () => {
  test('a missing key exits 4; sync-down pages through the listing and fetches only what is missing', () => {
    expect(labAws(['get', 's3://results-bucket/Lab/none', '-']).status).toBe(4);
    box.putS3Object('results-bucket/Lab/studies/a/study.json', '{"id":"a"}');
    box.putS3Object('results-bucket/Lab/studies/b/study.json', '{"id":"b"}');
    box.putS3Object('results-bucket/Lab/other.json', '{}');
    const into = join(box.root, 'restored');
    mkdirSync(join(into, 'a'), { recursive: true });
    writeFileSync(join(into, 'a/study.json'), '{"id":"a"}');
    const result = labAws(['sync-down', 's3://results-bucket/Lab/studies/', into], { FAKE_S3_PAGE: '1' });
    expect(result.status, result.stderr).toBe(0);
    expect(readFileSync(join(into, 'b/study.json'), 'utf8')).toBe('{"id":"b"}');
    expect(existsSync(join(into, 'other.json'))).toBe(false);
    expect(box.awsRequests().slice(1)).toEqual([
      'LIST results-bucket/Lab/studies/',
      'LIST results-bucket/Lab/studies/',
      'GET results-bucket/Lab/studies/b/study.json',
    ]);
  });
});

describe('lab-aws secret', () => {
  test('writes SecretString alone into a mode 600 file and prints nothing of it', () => {
    const file = join(box.root, 'agent-token');
    const result = labAws(['secret', SECRET_ID, file], { FAKE_AGENT_TOKEN: 'K10token::server:abc' });
    expect(result.status, result.stderr).toBe(0);
    expect(readFileSync(file, 'utf8')).toBe('K10token::server:abc');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(result.stdout + result.stderr).not.toContain('K10token');
    expect(box.calls().join('\n')).not.toContain('K10token');
    expectKeysKept(result.stdout + result.stderr);
  });

  // Bash reads a flat answer without escapes itself; one with JSON escapes (a quote, a backslash,
  // \u00e9) goes to python3's parser, which decodes them.
  test('a SecretString with JSON escapes is written decoded', () => {
    const file = join(box.root, 'agent-token');
    const token = 'K10"tok\\en/\u00e9';
    const result = labAws(['secret', SECRET_ID, file], { FAKE_AGENT_TOKEN: token });
    expect(result.status, result.stderr).toBe(0);
    expect(readFileSync(file, 'utf8')).toBe(token);
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  test('rides out a throttled GetSecretValue: HTTP 400 ThrottlingException is tried again', () => {
    const file = join(box.root, 'agent-token');
    const result = labAws(['secret', SECRET_ID, file], { FAKE_AWS_ANSWERS: '400T' });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).toContain(
      `GetSecretValue ${SECRET_ID}: HTTP 400 ThrottlingException: Rate exceeded, trying again (1 of 3)`,
    );
    expect(readFileSync(file, 'utf8')).toBe('fake-agent-token');
  });

  test('a refusal names the error Secrets Manager gave', () => {
    const result = labAws(['secret', SECRET_ID, join(box.root, 'agent-token')], { FAKE_SECRET_DENIED: '1' });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(
      `GetSecretValue ${SECRET_ID}: HTTP 400 AccessDeniedException: User is not authorized to perform: secretsmanager:GetSecretValue`,
    );
    expect(existsSync(join(box.root, 'agent-token'))).toBe(false);
  });
});

test('a curl older than 7.86.0 is refused by name before any request', () => {
  const result = labAws(['check'], { FAKE_OLD_CURL: '7.75.0' });
  expect(result.status).toBe(1);
  expect(result.stderr).toContain(
    'lab-aws: curl 7.75.0 cannot sign AWS requests with an instance role: --aws-sigv4 signs the x-amz-security-token and x-amz-content-sha256 headers from curl 7.86.0 on (this host has: curl 7.75.0 (x86_64-pc-linux-gnu))',
  );
  expect(result.stderr).toContain('and there is no AWS CLI to use instead');
  expect(box.awsRequests()).toEqual([]);
  expect(labAws(['check']).status).toBe(0);
});

test("with a curl too old to sign, the image's AWS CLI does the same work (the GPU host's Ubuntu 22.04 AMI)", () => {
  const cli = join(box.root, 'cli');
  mkdirSync(cli);
  writeFileSync(
    join(cli, 'aws'),
    `#!/bin/bash\necho "aws $*" >>"$SANDBOX/calls.log"\nif [ "$1" = secretsmanager ]; then echo 'K10token::server:abc'; fi\n`,
  );
  chmodSync(join(cli, 'aws'), 0o755);
  const env = { FAKE_OLD_CURL: '7.81.0', PATH: `${pathWithout('aws', box)}:${cli}` };
  const log = join(box.root, 'bootstrap.log');
  writeFileSync(log, 'log');
  expect(labAws(['put', log, 's3://results-bucket/Lab/host/bootstrap.log'], env).status).toBe(0);
  const token = join(box.root, 'agent-token');
  expect(labAws(['secret', SECRET_ID, token], env).status).toBe(0);
  expect(readFileSync(token, 'utf8')).toBe('K10token::server:abc');
  expect(statSync(token).mode & 0o777).toBe(0o600);
  expect(box.calls().filter((c) => c.startsWith('aws '))).toEqual([
    // A private copy, taken once it holds the key's upload lock (races.test.ts).
    expect.stringMatching(
      /^aws s3 cp --only-show-errors --region us-west-2 \/\S+\/lab-aws\.\w+\/bootstrap\.log s3:\/\/results-bucket\/Lab\/host\/bootstrap\.log$/,
    ),
    `aws secretsmanager get-secret-value --region us-west-2 --secret-id ${SECRET_ID} --query SecretString --output text`,
  ]);
  expect(box.awsRequests()).toEqual([]);
});
