import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { HOST_EXIT, scriptText } from '../../lib/control/host-scripts.ts';
import {
  LOG_CHUNK_BYTES,
  parseFileLog,
  parsePodLog,
  renderFileLog,
  renderPodLog,
} from '../../lib/control/log-scripts.ts';
import { PodLogCursor, timestampKey } from '../../lib/control/logs.ts';
import { makeSandbox } from '../aws/bootstrap/sandbox.ts';
import { needs, SHELLCHECK } from '../tools.ts';
import { shellcheckOnce } from './shellcheck-once.ts';

const BOOTSTRAP_LOG = '/var/log/lab-bootstrap.log';
const RUNNER_LOG = '/var/lib/lab/results/runner.log';

describe('the lab logs scripts', () => {
  const scripts = {
    'file, tail': renderFileLog({ file: BOOTSTRAP_LOG, tailLines: 200 }),
    'file, from an offset': renderFileLog({ file: RUNNER_LOG, tailLines: 200, from: 4096 }),
    'pod, tail': renderPodLog({ namespace: 'vllm', target: 'pod/qwen3-0', tailLines: 200 }),
    'pod, since': renderPodLog({
      namespace: 'vllm',
      target: 'deployment/qwen3-epp',
      container: 'epp',
      previous: true,
      tailLines: 200,
      since: '2025-10-14T09:00:01Z',
    }),
  };

  const findingsOf = shellcheckOnce(
    Object.fromEntries(Object.entries(scripts).map(([name, lines]) => [name, scriptText(lines)])),
  );

  test.runIf(needs(SHELLCHECK, import.meta.url, 'the shellcheck tests')).each(Object.keys(scripts))(
    '%s passes shellcheck as bash',
    (name) => {
      expect(findingsOf(name)).toEqual([]);
    },
  );
});

describe('a log file on the host', () => {
  function hostWith(text: string | undefined) {
    const box = makeSandbox();
    if (text !== undefined) {
      mkdirSync(box.path('/var/lib/lab/results'), { recursive: true });
      writeFileSync(box.path(RUNNER_LOG), text);
    }
    return (from?: number, tailLines = 3) => {
      const result = box.run(scriptText(renderFileLog({ file: RUNNER_LOG, tailLines, from })));
      return { ...result, answer: parseFileLog(result.stdout) };
    };
  }

  test('first its last lines with the size as the next offset, then what was appended', () => {
    const text = 'one\ntwo\nthree\nfour\nfive\n';
    const read = hostWith(text);
    const first = read();
    expect(first.status, first.stderr).toBe(0);
    expect(first.answer).toEqual({ next: text.length, text: 'three\nfour\nfive\n' });
    const again = read(text.indexOf('four'));
    expect(again.answer).toEqual({ next: text.length, text: 'four\nfive\n' });
  });

  test('a long log comes in chunks of LOG_CHUNK_BYTES, under the Run Command output cap', () => {
    const line = `${'x'.repeat(99)}\n`;
    const text = line.repeat(450);
    const read = hostWith(text);
    const first = read(0);
    expect(first.answer?.next).toBe(LOG_CHUNK_BYTES);
    expect(first.answer?.text).toBe(text.slice(0, LOG_CHUNK_BYTES));
    expect(first.stdout.length).toBeLessThan(24_000);
    const second = read(LOG_CHUNK_BYTES);
    expect(second.answer).toEqual({
      next: 2 * LOG_CHUNK_BYTES,
      text: text.slice(LOG_CHUNK_BYTES, 2 * LOG_CHUNK_BYTES),
    });
    const tail = read(undefined, 1000);
    expect(tail.answer?.next).toBe(text.length);
    expect(tail.answer?.text).toBe(text.slice(-LOG_CHUNK_BYTES));
  });

  test('a file shorter than the offset was replaced: read from its start', () => {
    expect(hostWith('new\n')(500).answer).toEqual({ next: 4, text: 'new\n' });
  });

  test('a missing file exits noLogFile', () => {
    const result = hostWith(undefined)();
    expect(result.status).toBe(HOST_EXIT.noLogFile);
    expect(result.stderr).toMatch(/runner\.log does not exist on this host/);
  });
});

describe('a pod log on the host', () => {
  function hostWithPods(pods: string) {
    const box = makeSandbox();
    writeFileSync(
      join(box.root, 'bin', 'kubectl'),
      `#!/bin/bash
echo "kubectl $*" >>"$SANDBOX/calls.log"
case "$*" in
*" get pods "*) printf '%s' "$FAKE_PODS" ;;
*" get "*) for p in $FAKE_PODS; do if [ "$4" = "pod/$p" ]; then echo "pod/$p"; fi; done ;;
*" logs "*) printf '2025-10-14T09:00:00Z started\\n2025-10-14T09:00:01.5Z ready\\n' ;;
esac
`,
    );
    chmodSync(join(box.root, 'bin', 'kubectl'), 0o755);
    return (target: string) => {
      const result = box.run(scriptText(renderPodLog({ namespace: 'vllm', target, tailLines: 50 })), {
        FAKE_PODS: pods,
      });
      return { ...result, calls: box.calls(), text: parsePodLog(result.stdout) };
    };
  }

  test('reads the log with timestamps when the pod is there', () => {
    const result = hostWithPods('qwen3-0 qwen3-1')('pod/qwen3-1');
    expect(result.status, result.stderr).toBe(0);
    expect(result.text).toBe('2025-10-14T09:00:00Z started\n2025-10-14T09:00:01.5Z ready\n');
    expect(result.calls).toEqual([
      'kubectl -n vllm get pod/qwen3-1 --ignore-not-found -o name',
      'kubectl -n vllm logs pod/qwen3-1 --timestamps --tail=50',
    ]);
  });

  test('a missing pod exits noPod and names the pods that are there', () => {
    const result = hostWithPods('qwen3-0 qwen3-1')('pod/qwen3-9');
    expect(result.status).toBe(HOST_EXIT.noPod);
    expect(result.stderr).toBe('pods in vllm: qwen3-0 qwen3-1\n');
    expect(result.calls).not.toContain('kubectl -n vllm logs pod/qwen3-9 --timestamps --tail=50');
  });
});

describe('following a pod log', () => {
  test('timestamps compare by their value, whatever digits kubelet trimmed', () => {
    expect(timestampKey('2025-10-14T09:00:01.5Z')).toBe('2025-10-14T09:00:01.500000000Z');
    expect(timestampKey('2025-10-14T09:00:01Z') < timestampKey('2025-10-14T09:00:01.000000001Z')).toBe(true);
  });

  test('prints each line once, keeps a line cut at the chunk limit for the next answer', () => {
    const cursor = new PodLogCursor();
    expect(cursor.since()).toBeUndefined();
    expect(
      cursor.take('2025-10-14T09:00:00.5Z a\n2025-10-14T09:00:01.25Z b\n2025-10-14T09:00:01.3Z c-cut'),
    ).toEqual(['a', 'b']);
    expect(cursor.since()).toBe('2025-10-14T09:00:01Z');
    expect(
      cursor.take(
        '2025-10-14T09:00:01.25Z b\n2025-10-14T09:00:01.3Z c-complete\n2025-10-14T09:00:01.3Z twin\n',
      ),
    ).toEqual(['c-complete', 'twin']);
  });
});
