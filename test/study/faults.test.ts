import { describe, expect, it } from 'vitest';
import { defaultLabConfig } from '../../lib/config/load.ts';
import { vllmSnapshot } from '../../lib/study/metrics.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import type { RunRecord } from '../../lib/study/results.ts';
import {
  IDENTICAL_PREFIXES_REASON,
  identicalPrefixStop,
  noMetricsStop,
  replicaRestarted,
  replicaRestartReasons,
} from '../../lib/study/validity.ts';

const plan = studyPlan(defaultLabConfig());

function record(id: string, invalidReasons: string[]): RunRecord {
  return {
    id,
    group: 'bound',
    title: id,
    dataset: 'prefix',
    startedAt: '2025-10-14T09:00:00.000Z',
    finishedAt: '2025-10-14T09:02:00.000Z',
    reset: 'endpoint',
    clients: [],
    replicas: [],
    valid: invalidReasons.length === 0,
    invalidReasons,
  };
}

describe('a replica that restarted during a run', () => {
  it('is told by a new pod uid or a pod gone, and only for pods seen before', () => {
    const before = new Map([
      ['qwen3-0', 'a'],
      ['qwen3-1', 'b'],
    ]);
    expect(replicaRestartReasons(['qwen3-0', 'qwen3-1'], before, new Map(before))).toEqual([]);
    const reasons = replicaRestartReasons(['qwen3-0', 'qwen3-1'], before, new Map([['qwen3-0', 'c']]));
    expect(reasons).toEqual([
      'replica qwen3-0: restarted during the run (its pod has a new uid): its cache and counters started again mid-run',
      'replica qwen3-1: restarted during the run (its pod was gone after the run): its cache and counters started again mid-run',
    ]);
    expect(replicaRestartReasons(['qwen3-0'], new Map(), new Map([['qwen3-0', 'c']]))).toEqual([]);
    expect(replicaRestarted(record('x', reasons))).toBe(true);
    expect(replicaRestarted(record('x', ['client x: Job failed (status.failed > 0)']))).toBe(false);
  });
});

describe('study-level stops', () => {
  it('identical prefixes stop the study while prefix runs remain', () => {
    const failed = record('bound-p8', [`${IDENTICAL_PREFIXES_REASON}: bound-p128 hit 93.0%, ...`]);
    const rest = plan.runs.slice(4);
    const stop = identicalPrefixStop([failed], rest, 'vllm/vllm-openai:v0.11.0');
    expect(stop?.reason).toBe(
      `${IDENTICAL_PREFIXES_REASON}: bound-p128 hit 93.0%, ...; the 14 prefix run(s) left would all be invalid`,
    );
    expect(stop?.change).toMatch(/benchmark\.image is vllm\/vllm-openai:v0\.11\.0.*lab run --new/);
    expect(
      identicalPrefixStop(
        [failed],
        rest.filter((r) => r.dataset === 'sharegpt'),
        'x',
      ),
    ).toBeUndefined();
    expect(identicalPrefixStop([record('bound-p8', [])], rest, 'x')).toBeUndefined();
  });

  it('no vllm: series on every replica stops the study; one replica with metrics, or a failed scrape, does not', () => {
    const blank = vllmSnapshot('process_resident_memory_bytes 1\n');
    const full = vllmSnapshot('vllm:num_requests_running{engine="0"} 0\n');
    expect(
      noMetricsStop([
        { pod: 'qwen3-0', snapshot: blank },
        { pod: 'qwen3-1', snapshot: blank },
      ])?.reason,
    ).toBe('no replica exposes vLLM metrics: /metrics of qwen3-0, qwen3-1 has no vllm: series');
    expect(
      noMetricsStop([
        { pod: 'qwen3-0', snapshot: blank },
        { pod: 'qwen3-1', snapshot: full },
      ]),
    ).toBeUndefined();
    expect(noMetricsStop([{ pod: 'qwen3-0', snapshot: blank }, { pod: 'qwen3-1' }])).toBeUndefined();
    expect(noMetricsStop([])).toBeUndefined();
  });
});
