import type { LabConfig } from '../config/schema.ts';
import { promptBlindLabel } from './prompt-visibility.ts';

/** The API a benchmark client speaks to a front end. */
export type Api = 'chat' | 'completions';

/** Which pair of replicas serves an arm: the standard ones, or llm-d's KV-events ones (docs/facts.md §3.7). */
export type ServerSet = 'standard' | 'kv-events';

/** What kind of front end an arm puts in front of the replicas. */
export type FrontEndKind = 'service' | 'router' | 'epp' | 'ai-gateway' | 'llmd';

/** One front end under test over one API, as the study sees it. */
export interface Arm {
  /** Stable id, used in run ids: `kube-proxy`, `router-cache-aware-completions`, `epp`, ... */
  readonly id: string;
  /** Human title for reports. */
  readonly title: string;
  readonly frontEnd: FrontEndKind;
  /**
   * The deployed front end the arm sends through: the id of its chat arm (`epp`, `router-cache-aware`).
   * An arm over `/v1/completions` shares the front end of its chat arm.
   */
  readonly frontEndId: string;
  /** Chat completions carry the prompt in `messages`; completions carry it in `prompt`. */
  readonly api: Api;
  /** The front end routes by the prompt's prefix (cache_aware router, EPP prefix scorers, llm-d). */
  readonly prefixAware: boolean;
  /**
   * Set when a prefix-aware front end cannot read the prompt over this arm's API at its pinned
   * version: the label of its runs in every table and chart (lib/study/prompt-visibility.ts).
   * Such an arm is a control, never a prefix-aware result.
   */
  readonly promptBlind?: string;
  /** True when the front end keeps its own prefix index and must be restarted before each run. */
  readonly keepsPrefixIndex: boolean;
  readonly servers: ServerSet;
  /** Optional arms run only when their front end is listed in `study.optionalArms`. */
  readonly optional: boolean;
  /** The router variant behind a router arm. */
  readonly routerVariant?: string;
}

/** Arm id of a front end over one API: the front end's id, plus `-completions` over `/v1/completions`. */
export function armId(frontEndId: string, api: Api): string {
  return api === 'chat' ? frontEndId : `${frontEndId}-completions`;
}

/** Arm id of a router variant over one API. */
export function routerArmId(variantName: string, api: Api): string {
  return armId(`router-${variantName}`, api);
}

/** A deployable front end, before it is paired with an API. */
type FrontEndSpec = Omit<Arm, 'id' | 'api' | 'promptBlind' | 'title'> & { readonly title: string };

/**
 * Every arm the configuration can describe, enabled or not, in study order: the baseline, the
 * routers (chat, then completions), the EPP over both APIs, then the optional arms over both APIs.
 * With `study.completionsArms` off only the chat arms exist.
 */
export function allArms(config: LabConfig): Arm[] {
  const apis: Api[] = config.study.completionsArms ? ['chat', 'completions'] : ['chat'];
  const routers: FrontEndSpec[] = config.router.variants.map((variant) => ({
    frontEndId: `router-${variant.name}`,
    title: `vllm-router ${variant.name}`,
    frontEnd: 'router',
    prefixAware: variant.policy === 'cache_aware',
    keepsPrefixIndex: true,
    servers: 'standard',
    optional: false,
    routerVariant: variant.name,
  }));
  const epp = (frontEndId: string, title: string, optional: boolean): FrontEndSpec => ({
    frontEndId,
    title,
    frontEnd: 'epp',
    prefixAware: true,
    keepsPrefixIndex: true,
    servers: 'standard',
    optional,
  });
  const kubeProxy = arm(config, 'chat', {
    frontEndId: 'kube-proxy',
    title: 'Kubernetes Service (kube-proxy)',
    frontEnd: 'service',
    prefixAware: false,
    keepsPrefixIndex: false,
    servers: 'standard',
    optional: false,
  });
  const overBoth = (spec: FrontEndSpec) => apis.map((api) => arm(config, api, spec));
  return [
    kubeProxy,
    // Routers keep the order of the published study: every variant over chat, then over completions.
    ...apis.flatMap((api) => routers.map((spec) => arm(config, api, spec))),
    ...overBoth(epp('epp', 'Envoy + GAIE Endpoint Picker', false)),
    ...overBoth(epp('epp-prefix3', 'Envoy + EPP, prefix-cache-scorer weight x3', true)),
    ...overBoth({
      frontEndId: 'ai-gateway',
      title: 'Envoy AI Gateway + InferencePool',
      frontEnd: 'ai-gateway',
      prefixAware: true,
      keepsPrefixIndex: true,
      servers: 'standard',
      optional: true,
    }),
    ...overBoth({
      frontEndId: 'llmd-precise',
      title: 'llm-d precise prefix-cache routing (KV events)',
      frontEnd: 'llmd',
      prefixAware: true,
      keepsPrefixIndex: true,
      servers: 'kv-events',
      optional: true,
    }),
  ];
}

function arm(config: LabConfig, api: Api, spec: FrontEndSpec): Arm {
  const promptBlind = spec.prefixAware ? promptBlindLabel(config, spec.frontEnd, api) : undefined;
  return {
    ...spec,
    id: armId(spec.frontEndId, api),
    title: api === 'chat' ? spec.title : `${spec.title} over /v1/completions`,
    api,
    ...(promptBlind ? { promptBlind } : {}),
  };
}

/** The arms this configuration runs: every core arm plus those of the optional front ends switched on. */
export function studyArms(config: LabConfig): Arm[] {
  const enabled = new Set<string>(config.study.optionalArms);
  return allArms(config).filter((arm) => !arm.optional || enabled.has(arm.frontEndId));
}

/** One arm per deployed front end of this study (its chat arm): what the charts create. */
export function studyFrontEnds(config: LabConfig): Arm[] {
  return studyArms(config).filter((arm) => arm.id === arm.frontEndId);
}
