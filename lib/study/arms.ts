import type { LabConfig } from '../config/schema.ts';

/** The API a benchmark client speaks to a front end. */
export type Api = 'chat' | 'completions';

/** Which pair of replicas serves an arm: the standard ones, or llm-d's KV-events ones (lab-spec 3.7). */
export type ServerSet = 'standard' | 'kv-events';

/** What kind of front end an arm puts in front of the replicas. */
export type FrontEndKind = 'service' | 'router' | 'epp' | 'ai-gateway' | 'llmd';

/** One front end under test, as the study sees it. */
export interface Arm {
  /** Stable id, used in run ids: `kube-proxy`, `router-cache-aware-completions`, `epp`, ... */
  readonly id: string;
  /** Human title for reports. */
  readonly title: string;
  readonly frontEnd: FrontEndKind;
  /** Chat completions carry the prompt in `messages`; completions carry it in `prompt`. */
  readonly api: Api;
  /** True when the front end keeps its own prefix index and must be restarted before each run. */
  readonly keepsPrefixIndex: boolean;
  readonly servers: ServerSet;
  /** Optional arms run only when listed in `study.optionalArms`. */
  readonly optional: boolean;
  /** The router variant behind a router arm. */
  readonly routerVariant?: string;
}

/** Arm id of a router variant over one API. */
export function routerArmId(variantName: string, api: Api): string {
  return api === 'chat' ? `router-${variantName}` : `router-${variantName}-completions`;
}

/**
 * Every arm the configuration can describe, enabled or not, in study order: the baseline, the
 * routers (chat, then completions), the EPP, then the optional arms.
 */
export function allArms(config: LabConfig): Arm[] {
  const arms: Arm[] = [
    {
      id: 'kube-proxy',
      title: 'Kubernetes Service (kube-proxy)',
      frontEnd: 'service',
      api: 'chat',
      keepsPrefixIndex: false,
      servers: 'standard',
      optional: false,
    },
  ];
  const apis: Api[] = config.study.routerCompletions ? ['chat', 'completions'] : ['chat'];
  for (const api of apis) {
    for (const variant of config.router.variants) {
      arms.push({
        id: routerArmId(variant.name, api),
        title: `vllm-router ${variant.name}${api === 'completions' ? ' over /v1/completions' : ''}`,
        frontEnd: 'router',
        api,
        keepsPrefixIndex: true,
        servers: 'standard',
        optional: false,
        routerVariant: variant.name,
      });
    }
  }
  arms.push(
    {
      id: 'epp',
      title: 'Envoy + GAIE Endpoint Picker',
      frontEnd: 'epp',
      api: 'chat',
      keepsPrefixIndex: true,
      servers: 'standard',
      optional: false,
    },
    {
      id: 'epp-prefix3',
      title: 'Envoy + EPP, prefix-cache-scorer weight x3',
      frontEnd: 'epp',
      api: 'chat',
      keepsPrefixIndex: true,
      servers: 'standard',
      optional: true,
    },
    {
      id: 'ai-gateway',
      title: 'Envoy AI Gateway + InferencePool',
      frontEnd: 'ai-gateway',
      api: 'chat',
      keepsPrefixIndex: true,
      servers: 'standard',
      optional: true,
    },
    {
      id: 'llmd-precise',
      title: 'llm-d precise prefix-cache routing (KV events)',
      frontEnd: 'llmd',
      api: 'chat',
      keepsPrefixIndex: true,
      servers: 'kv-events',
      optional: true,
    },
  );
  return arms;
}

/** The arms this configuration runs: every core arm plus the optional ones switched on. */
export function studyArms(config: LabConfig): Arm[] {
  const enabled = new Set<string>(config.study.optionalArms);
  return allArms(config).filter((arm) => !arm.optional || enabled.has(arm.id));
}
