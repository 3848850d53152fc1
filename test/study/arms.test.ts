import { describe, expect, it } from 'vitest';
import { defaultLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import { allArms, studyArms, studyFrontEnds } from '../../lib/study/arms.ts';
import { PROMPT_VISIBILITY, promptBlindLabel } from '../../lib/study/prompt-visibility.ts';
import { armById, frontEnd, targetBaseUrl } from '../../lib/study/topology.ts';

const ALL_OPTIONAL = { study: { optionalArms: ['epp-prefix3', 'ai-gateway', 'llmd-precise'] } };

describe('arms and prompt visibility (docs/facts.md §3.3, 3.4, 3.7)', () => {
  const config = parseLabConfig(ALL_OPTIONAL);
  const arms = new Map(allArms(config).map((arm) => [arm.id, arm]));

  it('runs every prefix-aware front end over both APIs', () => {
    for (const id of ['router-cache-aware', 'epp', 'epp-prefix3', 'ai-gateway', 'llmd-precise']) {
      expect(arms.get(id)?.api).toBe('chat');
      expect(arms.get(`${id}-completions`)?.api).toBe('completions');
      expect(arms.get(`${id}-completions`)?.frontEndId).toBe(id);
    }
  });

  it('labels the chat arms of front ends that cannot read chat parts, with the component and version', () => {
    const blind = [...arms.values()].filter((arm) => arm.promptBlind).map((arm) => [arm.id, arm.promptBlind]);
    expect(blind).toEqual([
      ['router-cache-aware', 'prompt-blind (chat content not read by vllm-router 0.1.15)'],
      ['router-cache-aware-tuned', 'prompt-blind (chat content not read by vllm-router 0.1.15)'],
      ['epp', 'prompt-blind (chat content not read by GAIE EPP v1.0.1)'],
      ['epp-prefix3', 'prompt-blind (chat content not read by GAIE EPP v1.0.1)'],
      ['ai-gateway', 'prompt-blind (chat content not read by GAIE EPP v1.0.1)'],
      ['llmd-precise', 'prompt-blind (chat content not read by llm-d inference scheduler v0.3.2)'],
    ]);
    // Policies that never read the prompt are not prefix-aware, so they carry no label.
    expect(arms.get('router-round-robin')?.prefixAware).toBe(false);
    expect(arms.get('kube-proxy')?.promptBlind).toBeUndefined();
  });

  it('takes visibility from one fact table keyed by the configured version', () => {
    const bumped = parseLabConfig({
      gaie: { eppImage: 'registry.k8s.io/gateway-api-inference-extension/epp:v1.1.0' },
    });
    // No source-checked row for v1.1.0: the product does not assume the EPP sees the prompt.
    expect(promptBlindLabel(bumped, 'epp', 'chat')).toMatch(/^prompt visibility unknown .*GAIE EPP v1.1.0/);
    expect(PROMPT_VISIBILITY.every((fact) => fact.completions)).toBe(true);
    expect(promptBlindLabel(config, 'epp', 'completions')).toBeUndefined();
  });

  it('sends a completions arm through the front end of its chat arm', () => {
    expect(frontEnd(config, armById(config, 'epp-completions'))).toEqual(
      frontEnd(config, armById(config, 'epp')),
    );
    expect(targetBaseUrl(config, { kind: 'arm', arm: 'llmd-precise-completions' })).toBe(
      'http://envoy-llmd-precise.vllm.svc.cluster.local:8081',
    );
  });

  it('deploys one front end per chat arm, only for enabled optional front ends', () => {
    expect(studyFrontEnds(defaultLabConfig()).map((arm) => arm.id)).toEqual([
      'kube-proxy',
      'router-round-robin',
      'router-cache-aware',
      'router-cache-aware-tuned',
      'epp',
    ]);
    expect(studyArms(parseLabConfig({ study: { optionalArms: ['ai-gateway'] } })).map((a) => a.id)).toContain(
      'ai-gateway-completions',
    );
  });
});
