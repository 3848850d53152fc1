import { describe, expect, it } from 'vitest';
import { defaultLabConfig } from '../../lib/config/load.ts';
import { percent, reportSections, signed, split, verdict } from '../../lib/report/format.ts';
import { markdownReport, markdownTable } from '../../lib/report/markdown.ts';
import { bestArm, leftOnTable, reportTables } from '../../lib/report/tables.ts';
import type { RunRecord, StudyRecord } from '../../lib/study/results.ts';
import { upperBound } from '../../lib/study/workload.ts';
import { fixtureStudy, INCOMPLETE_REASONS, MISSING_RESULT_REASON } from './fixture.ts';

const study = fixtureStudy();
const tables = reportTables(study);
const sections = reportSections(tables);
const section = (id: string) => {
  const found = sections.find((s) => s.id === id);
  if (!found) throw new Error(`no section ${id}`);
  return found;
};
const rowOf = (id: string, first: string) => section(id).table?.rows.find((row) => row[0] === first);
const run = (id: string): RunRecord => {
  const found = study.runs.find((r) => r.id === id);
  if (!found?.summary) throw new Error(`fixture run ${id} has no summary`);
  return found;
};
const withRuns = (runs: RunRecord[]): StudyRecord => ({ ...study, runs });

describe('per-arm table (prefix workload)', () => {
  it('lists the valid arms in study order with the ideal partition as reference, invalid ones left out', () => {
    expect(tables.prefixArms.map((r) => r.arm)).toEqual([
      'kube-proxy',
      'router-round-robin',
      'router-cache-aware',
      'router-cache-aware-tuned',
      'router-round-robin-completions',
      'router-cache-aware-completions',
      'epp',
      'epp-completions',
    ]);
    expect(
      section('arms')
        .table?.rows.map((r) => r[0])
        .at(-1),
    ).toBe('Ideal partition (reference)');
    expect(section('arms').warnings?.at(-1)).toBe(
      'Left out as invalid (see Invalid runs): arm-router-cache-aware-tuned-completions-prefix.',
    );
  });

  it('shows request split, hit rate per replica, throughput and latencies to one decimal', () => {
    expect(rowOf('arms', 'Kubernetes Service (kube-proxy)')).toEqual([
      'Kubernetes Service (kube-proxy)',
      '512 / 513',
      '42.1% / 41.9%',
      '42.0%',
      '41.2% +-1.1',
      'baseline',
      '19,658',
      '18,483 +-127',
      'baseline',
      '214.3 ms',
      '611.4 ms',
      '41.9 ms',
    ]);
    // Two concurrent clients: all tokens over the longest duration (11,020 + 10,880 = 21,900 would
    // overstate it), mean TTFT weighted per request, ITL per output token, p99 the worst client's.
    expect(rowOf('arms', 'Ideal partition (reference)')).toEqual([
      'Ideal partition (reference)',
      '513 / 513',
      '78.1% / 77.9%',
      '78.0%',
      '77.1% +-0.6',
      '—',
      '21,760',
      '20,681 +-80',
      '—',
      '150.4 ms',
      '418.9 ms',
      '28.1 ms',
    ]);
    expect(tables.partition?.concurrency).toBe(32);
  });
});

describe('invalid runs', () => {
  it('are listed with every reason and marked invalid', () => {
    expect(tables.invalid.map((r) => [r.runId, r.reasons])).toEqual([
      ['arm-router-cache-aware-tuned-completions-prefix', INCOMPLETE_REASONS],
      ['arm-epp-sharegpt', [MISSING_RESULT_REASON]],
    ]);
    expect(section('invalid').table?.rows[0]).toEqual([
      'arm-router-cache-aware-tuned-completions-prefix',
      'invalid',
      'vllm-router cache-aware-tuned over /v1/completions: prefix workload, concurrency 32',
      `${INCOMPLETE_REASONS[0]}; ${INCOMPLETE_REASONS[1]}`,
    ]);
    expect(section('sharegpt').warnings).toEqual([
      'Left out as invalid (see Invalid runs): arm-epp-sharegpt.',
    ]);
    expect(tables.sharegpt.map((r) => r.arm)).not.toContain('epp');
  });

  it('never become the best arm, even with the highest hit rate', () => {
    const incomplete = run('arm-router-cache-aware-tuned-completions-prefix');
    expect(incomplete.summary?.hitRate).toBeGreaterThan(
      run('arm-epp-completions-prefix').summary?.hitRate ?? 1,
    );
    expect(bestArm(tables.prefixArms)?.arm).toBe('epp-completions');
    expect(tables.leftOnTable.available && tables.leftOnTable.bestArm.arm).toBe('epp-completions');
    // Were it valid, it would win: the exclusion is what keeps it out.
    const revalidated = withRuns(
      study.runs.map((r) => (r.id === incomplete.id ? { ...r, valid: true, invalidReasons: [] } : r)),
    );
    expect(bestArm(reportTables(revalidated).prefixArms)?.arm).toBe('router-cache-aware-tuned-completions');
  });

  it('a valid record of the same run after an invalid attempt (resumed study) enters the tables', () => {
    const epp = run('arm-epp-prefix');
    const attempt: RunRecord = { ...epp, valid: false, invalidReasons: ['caches were not reset'] };
    const t = reportTables(withRuns([attempt, ...study.runs]));
    expect(t.invalid.map((r) => r.runId)).toContain('arm-epp-prefix');
    expect(t.prefixArms.map((r) => r.arm)).toContain('epp');
    expect(t.omitted.prefixArms).toEqual(['arm-router-cache-aware-tuned-completions-prefix']);
  });

  it('a run marked valid without a summary goes to the invalid table, and an unexplained invalid run says so', () => {
    const { summary: _dropped, ...noSummary } = run('arm-kube-proxy-prefix');
    const silent: RunRecord = { ...run('arm-router-round-robin-prefix'), valid: false, invalidReasons: [] };
    const t = reportTables(
      withRuns(study.runs.map((r) => (r.id === noSummary.id ? noSummary : r.id === silent.id ? silent : r))),
    );
    expect(t.prefixArms.map((r) => r.arm)).not.toContain('kube-proxy');
    expect(t.invalid.find((r) => r.runId === 'arm-kube-proxy-prefix')?.reasons[0]).toMatch(/no summary/);
    expect(t.invalid.find((r) => r.runId === 'arm-router-round-robin-prefix')?.reasons).toEqual([
      'marked invalid without a recorded reason',
    ]);
  });
});

describe('upper-bound sweep', () => {
  it('shows the formula bound beside each measured hit rate', () => {
    const config = defaultLabConfig();
    expect(tables.bounds.map((r) => [r.prefixes, r.workingSetTokens])).toEqual([
      [128, 262_144],
      [64, 131_072],
      [16, 32_768],
      [8, 16_384],
    ]);
    for (const row of tables.bounds) {
      expect(row.bound).toBeCloseTo(upperBound({ ...config.workload, prefixes: row.prefixes ?? 0 }), 12);
    }
    expect(section('bounds').table?.rows.map((r) => [r[0], r[2], r[3]])).toEqual([
      ['128', '44.4%', '82.0%'],
      ['64', '77.6%', '87.8%'],
      ['16', '90.9%', '92.2%'],
      ['8', '92.3%', '93.0%'],
    ]);
    expect(section('bounds').table?.rows[0]).toEqual([
      '128',
      '262,144',
      '44.4%',
      '82.0%',
      '12,929',
      '215.7 ms',
      '42.8 ms',
    ]);
    expect(tables.workloadBound).toBeCloseTo((7 / 8) * (2048 / 2186), 12);
  });
});

describe('prompt-blind arms (docs/facts.md §3.3, 3.4)', () => {
  it('carry the component and version that cannot read the chat prompt in every table', () => {
    const epp = 'Envoy + GAIE Endpoint Picker [prompt-blind (chat content not read by GAIE EPP v1.0.1)]';
    expect(rowOf('arms', epp)?.[3]).toBe('42.9%');
    expect(rowOf('arms', 'Envoy + GAIE Endpoint Picker over /v1/completions')?.[3]).toBe('73.7%');
    expect(
      rowOf(
        'sharegpt',
        'vllm-router cache-aware [prompt-blind (chat content not read by vllm-router 0.1.15)]',
      ),
    ).toBeDefined();
    // Policies that do not route by the prompt are not labelled.
    expect(rowOf('arms', 'vllm-router round-robin')).toBeDefined();
    expect(tables.prefixArms.filter((r) => r.promptBlind).map((r) => r.arm)).toEqual([
      'router-cache-aware',
      'router-cache-aware-tuned',
      'epp',
    ]);
  });

  it('are never the best arm, whatever they measured', () => {
    const raised = withRuns(
      study.runs.map((r) =>
        r.id === 'arm-epp-prefix' && r.summary ? { ...r, summary: { ...r.summary, hitRate: 0.99 } } : r,
      ),
    );
    expect(bestArm(reportTables(raised).prefixArms)?.arm).toBe('epp-completions');
    const onlyBlind = reportTables(raised).prefixArms.filter((r) => r.promptBlind);
    expect(leftOnTable(onlyBlind, tables.partition)).toMatchObject({ available: false });
  });
});

describe('concurrency sweep', () => {
  it('puts each swept arm at 4, 8 and the study concurrency', () => {
    expect(tables.sweep.map((r) => [r.arm, r.concurrency])).toEqual([
      ['kube-proxy', 4],
      ['kube-proxy', 8],
      ['kube-proxy', 32],
      ['router-cache-aware', 4],
      ['router-cache-aware', 8],
      ['router-cache-aware', 32],
    ]);
    const label = 'vllm-router cache-aware [prompt-blind (chat content not read by vllm-router 0.1.15)]';
    expect(rowOf('sweep', label)?.slice(0, 5)).toEqual([label, '4', '528 / 497', '43.8% / 42.9%', '43.4%']);
  });
});

describe('left on the table', () => {
  it('compares the best valid arm with the ideal partition in points and percent', () => {
    const lot = tables.leftOnTable;
    if (!lot.available) throw new Error(lot.reason);
    const best = run('arm-epp-completions-prefix').summary;
    const ideal = run('partition').summary;
    if (!best || !ideal || best.hitRate === null || ideal.hitRate === null) throw new Error('fixture');
    const byMetric = Object.fromEntries(lot.rows.map((r) => [r.metric, r]));
    expect(byMetric.hitRate.difference).toBeCloseTo((ideal.hitRate - best.hitRate) * 100, 10);
    // Per metric the best arm may differ: the cache-aware router over completions has the best throughput.
    const fastest = run('arm-router-cache-aware-completions-prefix').summary?.totalTokenThroughput ?? 0;
    expect(byMetric.totalTokensPerSecond.bestArmTitle).toBe('vllm-router cache-aware over /v1/completions');
    expect(byMetric.totalTokensPerSecond.difference).toBeCloseTo(
      ((ideal.totalTokenThroughput - fastest) / fastest) * 100,
      10,
    );
    expect(byMetric.meanTtftMs.difference).toBeCloseTo(
      ((ideal.meanTtftMs - best.meanTtftMs) / best.meanTtftMs) * 100,
      10,
    );
    expect(byMetric.p99TtftMs.difference).toBeCloseTo(((418.9 - 478.6) / 478.6) * 100, 10);
    expect(byMetric.meanItlMs.difference).toBeCloseTo(
      ((ideal.meanItlMs - best.meanItlMs) / best.meanItlMs) * 100,
      10,
    );
    const epp = 'Envoy + GAIE Endpoint Picker over /v1/completions';
    expect(section('left-on-the-table').table?.rows).toEqual([
      ['Hit rate', epp, '73.7%', '78.0%', '+4.3 points', 'better'],
      ['Total tok/s', 'vllm-router cache-aware over /v1/completions', '22,400', '21,760', '-2.9%', 'worse'],
      ['Mean TTFT', epp, '168.9 ms', '150.4 ms', '-11.0%', 'better'],
      ['p99 TTFT', epp, '478.6 ms', '418.9 ms', '-12.5%', 'better'],
      ['ITL', epp, '31.6 ms', '28.1 ms', '-11.1%', 'better'],
    ]);
    // 73.7% against 64.8%: the cache-aware router is not within the simulated noise of the best.
    expect(lot.bestArms.map((r) => r.arm)).toEqual(['epp-completions']);
    expect(section('left-on-the-table').notes).toEqual([
      `Best hit rate: ${epp} 73.7%; no other arm is within the noise of it.`,
    ]);
  });

  it('is not available without a valid ideal partition or a valid arm, and says why', () => {
    const noPartition = reportTables(
      withRuns(
        study.runs.map((r) => (r.group === 'partition' ? { ...r, valid: false, invalidReasons: ['x'] } : r)),
      ),
    );
    expect(noPartition.leftOnTable).toEqual({
      available: false,
      reason: 'the ideal-partition run is missing or invalid',
    });
    expect(noPartition.partition).toBeUndefined();
    expect(reportSections(noPartition).find((s) => s.id === 'left-on-the-table')?.notes).toEqual([
      'Not available: the ideal-partition run is missing or invalid.',
    ]);
    expect(leftOnTable([], tables.partition)).toEqual({
      available: false,
      reason: 'no valid prefix-workload arm run with a hit rate whose front end can see the prompt',
    });
  });

  it('says when the ideal partition is worse', () => {
    expect(
      verdict({
        metric: 'p99TtftMs',
        label: 'p99 TTFT',
        bestArmTitle: 'x',
        bestArm: 400,
        ideal: 420,
        difference: 5,
        unit: 'percent',
        higherIsBetter: false,
      }),
    ).toBe('worse');
  });
});

describe('formatting', () => {
  it('uses one decimal, signs differences and marks missing values', () => {
    expect(percent(0.4444)).toBe('44.4%');
    expect(percent(null)).toBe('—');
    expect(signed(4.26, 'points')).toBe('+4.3 points');
    expect(signed(-12.47, 'percent')).toBe('-12.5%');
    expect(signed(-0.01, 'percent')).toBe('0.0%');
    expect(split([512, 513])).toBe('512 / 513');
  });
});

describe('metadata', () => {
  it('records versions, instance and AZ, GPU UUIDs, KV cache, K3s and times', () => {
    const entries = Object.fromEntries(tables.metadata.map((e) => [e.label, e.value]));
    expect(entries).toMatchObject({
      Started: '2025-11-03T09:10:41Z',
      Finished: '2025-11-03T10:55:02Z',
      Instance: 'g6.12xlarge in us-east-1b',
      'KV cache per replica': '163,472 tokens',
      K3s: 'v1.33.5+k3s1',
      'GPU of qwen3-0': 'GPU-3f1c2a9e-7b44-4d0e-9a51-0c6e2d8b1f17',
      'GPU of qwen3-1': 'GPU-a82d5e10-4c3b-47f2-b6d9-91e0f4c7a325',
      'vllm-router': '0.1.15',
    });
    expect(entries['Staged runs']).toBe('none');
  });

  it('lists K3s once although the host reports it and the versions list it too', () => {
    expect(study.metadata.versions.k3s).toBe(study.metadata.k3sVersion);
    const labels = tables.metadata.map((e) => e.label.toLowerCase());
    expect(labels.filter((label) => label === 'k3s')).toEqual(['k3s']);
    const differing = {
      ...study,
      metadata: { ...study.metadata, versions: { ...study.metadata.versions, k3s: 'v1.36.4+k3s1' } },
    };
    const both = reportTables(differing).metadata.filter((e) => e.label.toLowerCase() === 'k3s');
    expect(both.map((e) => e.value)).toEqual(['v1.33.5+k3s1', 'v1.36.4+k3s1']);
  });

  it('says how many runs were staged, and where staging fell back', () => {
    const staging = {
      during: 'partition',
      clientsCreatedAt: '2025-11-03T09:20:00Z',
      gatesOpenedAt: '2025-11-03T09:22:00Z',
      gates: { 'gate-arm-kube-proxy-prefix': 'qwen3-nodeport' },
    };
    const runs = study.runs.map((r, i) => (i === 5 || i === 6 ? { ...r, staging } : r));
    const staged = (s: StudyRecord) =>
      Object.fromEntries(reportTables(s).metadata.map((e) => [e.label, e.value]))['Staged runs'];
    expect(staged(withRuns(runs))).toBe(
      `2 of ${runs.length} (clients started behind a closed gate during the run before)`,
    );
    const fellBack = runs.map((r, i) =>
      i === 7
        ? {
            ...r,
            staging: {
              during: staging.during,
              clientsCreatedAt: staging.clientsCreatedAt,
              gates: staging.gates,
              fellBack: 'the client ended',
            },
          }
        : r,
    );
    expect(staged(withRuns(fellBack))).toBe(
      `2 of ${runs.length} (clients started behind a closed gate during the run before); staging fell back at ${runs[7].id}: the client ended`,
    );
  });
});

describe('markdown report', () => {
  const md = markdownReport(tables, { source: '/results/study.json' });

  it('has every section as a table, and invalid runs only in their own table', () => {
    for (const title of [
      '## Arms: prefix workload',
      '## Left on the table',
      '## Arms: more client figures',
      '## Prediction vs measurement',
      '## Upper-bound sweep: one replica directly',
      '## ShareGPT control',
      '## Concurrency sweep',
      '## Invalid runs',
      '## Study',
    ]) {
      expect(md).toContain(title);
    }
    expect(md).toContain(
      '| Kubernetes Service (kube-proxy) | 512 / 513 | 42.1% / 41.9% | 42.0% | 41.2% +-1.1 | baseline | 19,658 | 18,483 +-127 | baseline | 214.3 ms | 611.4 ms | 41.9 ms |',
    );
    expect(md).toContain('| 128 | 262,144 | 44.4% | 82.0% | 12,929 | 215.7 ms | 42.8 ms |');
    expect(md).toContain(
      '| Hit rate | Envoy + GAIE Endpoint Picker over /v1/completions | 73.7% | 78.0% | +4.3 points | better |',
    );
    const tuned = md.split('\n').filter((line) => line.includes('cache-aware-tuned over /v1/completions'));
    // The invalid prefix run appears once, in the invalid table; its valid ShareGPT control once, as a row.
    expect(tuned).toHaveLength(2);
    expect(tuned.filter((line) => line.includes('| invalid |'))).toHaveLength(1);
  });

  it('escapes pipes inside cells', () => {
    expect(markdownTable({ headers: ['a'], align: ['left'], rows: [['x | y']] })).toBe(
      '| a |\n|:---|\n| x \\| y |',
    );
  });
});

describe('runs that overlapped', () => {
  it('lists each run recorded beside others with what it ran beside, and no section when none did', () => {
    expect(sections.some((s) => s.id === 'overlaps')).toBe(tables.overlaps.length > 0);
    const runs = study.runs.map((r) => (r.id === 'bound-p128' ? { ...r, overlappedWith: ['bound-p64'] } : r));
    const overlapped = reportSections(reportTables(withRuns(runs)));
    const table = overlapped.find((s) => s.id === 'overlaps')?.table;
    expect(table?.rows).toContainEqual(['bound-p128', 'valid', run('bound-p128').title, 'bound-p64']);
    const none = study.runs.map(({ overlappedWith: _, ...r }) => r);
    expect(reportSections(reportTables(withRuns(none))).some((s) => s.id === 'overlaps')).toBe(false);
  });
});

describe('warnings of a run (what its checks could not establish)', () => {
  it('are said under the invalid runs, with the run and its status; a run without any adds nothing', () => {
    const warning =
      'llm-d\'s precise scorer: no "Got pod scores" line in the EPP log: the EPP logs it at --v 4 or more (docs/facts.md §3.7), so whether the precise scorer\'s look-ups ever found blocks is unknown';
    const warned = study.runs.map((r) =>
      r.id === 'arm-epp-completions-prefix' ? { ...r, warnings: [warning] } : r,
    );
    const notes = reportSections(reportTables(withRuns(warned))).find((s) => s.id === 'invalid')?.notes;
    expect(notes).toEqual([`Not established for arm-epp-completions-prefix (valid): ${warning}`]);
    expect(section('invalid').notes).toEqual([]);
  });
});
