import { describe, expect, it } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import { findRun, studyPlan } from '../../lib/study/plan.ts';
import {
  byId,
  frontEnds,
  pickers,
  plan,
  rehearsal,
  replicas,
  useRehearsalServers,
} from './rehearsal-setup.ts';

/** Rehearsals of the evidence a run needs before and after it: the preflight per front end, the EPP’s proof that it saw the prompts. */

useRehearsalServers();

describe('rehearsal: the EPP proves it saw the prompts', () => {
  const runs = ['arm-epp-prefix', 'arm-epp-completions-prefix', 'arm-epp-completions-sharegpt'].map((id) =>
    findRun(plan, id),
  );

  it('records the prefix indexer size of a completions prefix run, read with the bearer token', async () => {
    const r = rehearsal({ plan: { runs } });
    const study = byId(await r.run());
    expect(study.get('arm-epp-completions-prefix')?.promptEvidence).toEqual({
      status: 'seen',
      component: 'GAIE EPP v1.0.1',
      metrics: { inference_extension_prefix_indexer_size: 4096 },
      detail: 'inference_extension_prefix_indexer_size is 4096 after the run',
    });
    // Chat runs are prompt-blind controls and ShareGPT runs are not about prefixes: no evidence asked.
    expect(study.get('arm-epp-prefix')?.promptEvidence).toBeUndefined();
    expect(study.get('arm-epp-completions-sharegpt')?.promptEvidence).toBeUndefined();
    expect(pickers.scraped).toEqual(['epp-completions']);
    for (const run of study.values()) expect(run.valid, run.invalidReasons.join()).toBe(true);
  });

  it('makes the run invalid, naming the metric, when the indexer is empty', async () => {
    const r = rehearsal({ plan: { runs } });
    pickers.indexerSize = { 'epp-completions': 0 };
    const study = byId(await r.run());
    const run = study.get('arm-epp-completions-prefix');
    expect(run?.valid).toBe(false);
    expect(run?.invalidReasons).toEqual([
      'front end did not see the prompts (GAIE EPP v1.0.1): inference_extension_prefix_indexer_size is 0 after the run: the EPP indexed no prompt, so its prefix-cache-scorer scored every pod 0',
    ]);
    expect(study.get('arm-epp-prefix')?.valid).toBe(true);
    expect(study.get('arm-epp-completions-sharegpt')?.valid).toBe(true);
  });

  it('for llm-d reads the KV-block index counters, and records the evidence as unavailable when they are not exported', async () => {
    const llmd = parseLabConfig({ study: { optionalArms: ['llmd-precise'] } });
    const llmdRun = findRun(studyPlan(llmd), 'arm-llmd-precise-completions-prefix');
    const seen = rehearsal({ config: llmd, plan: { runs: [llmdRun] }, hitRate: () => 0.7 });
    const [run] = (await seen.run()).runs;
    expect(run.valid, run.invalidReasons.join()).toBe(true);
    expect(run.promptEvidence).toMatchObject({
      status: 'seen',
      component: 'llm-d inference scheduler v0.3.2',
      metrics: { kvcache_index_lookup_requests_total: 1025, kvcache_index_admissions_total: 18432 },
    });

    const blind = rehearsal({ config: llmd, plan: { runs: [llmdRun] }, hitRate: () => 0.7 });
    pickers.llmdWithoutMetrics = true;
    const [unavailable] = (await blind.run()).runs;
    expect(unavailable.valid).toBe(true);
    expect(unavailable.promptEvidence?.status).toBe('unavailable');
    expect(unavailable.promptEvidence?.detail).toMatch(/enableMetrics: true/);
  });
});

describe('rehearsal: a preflight per front end', () => {
  it('sends one tiny request through each arm before the study’s first run and its first reset', async () => {
    const runs = ['arm-kube-proxy-prefix', 'arm-kube-proxy-sharegpt', 'arm-epp-completions-prefix'].map(
      (id) => findRun(plan, id),
    );
    const r = rehearsal({ plan: { runs } });
    const events: string[] = [];
    frontEnds.onRequest = (arm) => events.push(`preflight ${arm}`);
    for (const replica of replicas) replica.onReset = () => events.push(`reset ${replica.pod}`);
    const study = await r.run();
    // All before the first run: a preflight request never lands in a front end restarted early.
    expect(events).toEqual([
      'preflight kube-proxy',
      'preflight epp-completions',
      'reset qwen3-0',
      'reset qwen3-1',
      'reset qwen3-0',
      'reset qwen3-1',
      'reset qwen3-0',
      'reset qwen3-1',
    ]);
    expect(frontEnds.requests.map(({ arm, path, body }) => ({ arm, path, body }))).toEqual([
      {
        arm: 'kube-proxy',
        path: '/v1/chat/completions',
        body: { model: 'qwen3', messages: [{ role: 'user', content: 'Say OK.' }], max_tokens: 1 },
      },
      {
        arm: 'epp-completions',
        path: '/v1/completions',
        body: { model: 'qwen3', prompt: 'Say OK.', max_tokens: 1 },
      },
    ]);
    expect(study.runs[0].preflight?.ok).toBe(true);
    expect(study.runs[0].preflight?.detail).toMatch(
      new RegExp(
        `^POST ${frontEnds.url}/kube-proxy/v1/chat/completions answered 200 and qwen3-[01] counted it$`,
      ),
    );
    expect(study.runs[1].preflight).toBeUndefined();
    for (const run of study.runs) expect(run.valid, run.invalidReasons.join()).toBe(true);
  });

  it('marks every run of an arm whose preflight fails invalid, without running them', async () => {
    const runs = ['arm-kube-proxy-prefix', 'arm-epp-completions-prefix', 'arm-epp-completions-sharegpt'].map(
      (id) => findRun(plan, id),
    );
    const r = rehearsal({ plan: { runs } });
    frontEnds.failing.add('epp-completions');
    const study = byId(await r.run());
    const reason = `not started: preflight failed: POST ${frontEnds.url}/epp-completions/v1/completions answered HTTP 503: no healthy upstream`;
    for (const id of ['arm-epp-completions-prefix', 'arm-epp-completions-sharegpt']) {
      expect(study.get(id)?.valid, id).toBe(false);
      expect(study.get(id)?.invalidReasons, id).toEqual([reason]);
    }
    expect(study.get('arm-kube-proxy-prefix')?.valid).toBe(true);
    expect(r.cluster.created.map((j) => j.metadata.name)).toEqual(['bench-arm-kube-proxy-prefix']);
    // Once per arm, its 503 tried three times (it may pass): the second run of the arm sends nothing.
    expect(frontEnds.requests.filter((q) => q.arm === 'epp-completions')).toHaveLength(3);
    expect(r.cluster.restarted).toEqual([]);
  });

  it('fails a preflight whose request is answered but reaches no replica', async () => {
    const r = rehearsal({ plan: { runs: [findRun(plan, 'arm-epp-prefix')] } });
    frontEnds.blackHoles.add('epp');
    const [run] = (await r.run()).runs;
    expect(run.invalidReasons).toEqual([
      `not started: preflight failed: POST ${frontEnds.url}/epp/v1/chat/completions answered 200, but no replica of qwen3 counted a finished request within 30s`,
    ]);
  });

  describe('the AI Gateway arm also needs its route Accepted and ResolvedRefs and its Gateway Programmed', () => {
    const aiGateway = parseLabConfig({ study: { optionalArms: ['ai-gateway'] } });
    const run = findRun(studyPlan(aiGateway), 'arm-ai-gateway-completions-prefix');
    const routeStatus = (resolved: string) => ({
      parents: [
        {
          parentRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'ai-gateway' },
          controllerName: 'gateway.envoyproxy.io/gatewayclass-controller',
          conditions: [
            { type: 'Accepted', status: 'True', reason: 'Accepted', message: 'Route is accepted' },
            resolved === 'True'
              ? {
                  type: 'ResolvedRefs',
                  status: 'True',
                  reason: 'ResolvedRefs',
                  message: 'Resolved all the Object references for the Route',
                }
              : {
                  type: 'ResolvedRefs',
                  status: 'False',
                  reason: 'InvalidKind',
                  message: 'Kind InferencePool is not supported',
                },
          ],
        },
      ],
    });
    const programmed = { conditions: [{ type: 'Programmed', status: 'True', reason: 'Programmed' }] };

    it('runs, with prompt evidence from its EPP, when the conditions are True', async () => {
      const r = rehearsal({
        config: aiGateway,
        plan: { runs: [run] },
        hitRate: () => 0.7,
        statuses: { 'httproutes/ai-gateway': routeStatus('True'), 'gateways/ai-gateway': programmed },
      });
      const [record] = (await r.run()).runs;
      expect(record.valid, record.invalidReasons.join()).toBe(true);
      expect(record.preflight?.ok).toBe(true);
      expect(record.promptEvidence?.status).toBe('seen');
      expect(r.cluster.events.slice(0, 2)).toEqual([
        'status httproutes/ai-gateway',
        'status gateways/ai-gateway',
      ]);
    });

    it('is not started when ResolvedRefs is False (the manual lab’s InvalidKind)', async () => {
      const r = rehearsal({
        config: aiGateway,
        plan: { runs: [run] },
        statuses: { 'httproutes/ai-gateway': routeStatus('False') },
      });
      const [record] = (await r.run()).runs;
      expect(record.invalidReasons).toEqual([
        'not started: preflight failed: HTTPRoute vllm/ai-gateway on Gateway ai-gateway: ResolvedRefs is False (InvalidKind: Kind InferencePool is not supported); Gateway vllm/ai-gateway does not exist',
      ]);
      expect(frontEnds.requests).toEqual([]);
      expect(r.cluster.created).toEqual([]);
    });
  });
});

// ---- Issue 11: faults the runner survives ------------------------------------------------------
