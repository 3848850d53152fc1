import type { LabConfig } from '../config/schema.ts';
import type { Api, FrontEndKind } from './arms.ts';

/**
 * What a prefix-aware front end can read of a request's prompt, per API, at a pinned version.
 * `vllm bench serve --backend openai-chat` sends chat content as a parts array
 * (`[{"type": "text", "text": ...}]`), `--backend openai` sends the completions prompt as a string
 * (docs/facts.md §3.8). One row per component version: a version bump adds or changes one line here.
 */
export interface PromptVisibilityFact {
  /** The part that reads the request to route it, as reports name it. */
  readonly component: string;
  readonly version: string;
  /** Reads the prompt of `/v1/chat/completions` requests as the benchmark client sends them. */
  readonly chat: boolean;
  /** Reads the `prompt` string of `/v1/completions` requests. */
  readonly completions: boolean;
  /** Where the fact was read. */
  readonly source: string;
}

export const PROMPT_VISIBILITY: readonly PromptVisibilityFact[] = [
  {
    component: 'vllm-router',
    version: '0.1.15',
    chat: false,
    completions: true,
    source:
      'docs/facts.md §3.3: for /v1/chat/completions the routing text is session_params.session_id or ""; for /v1/completions it is the prompt',
  },
  {
    component: 'GAIE EPP',
    version: 'v1.0.1',
    chat: false,
    completions: true,
    source:
      'docs/facts.md §3.4, GAIE v1.0.1 pkg/epp/util/request/body.go: chat messages count only when content is a string; parts arrays are read from v1.1.0',
  },
  {
    component: 'llm-d inference scheduler',
    version: 'v0.3.2',
    chat: false,
    completions: true,
    source:
      'docs/facts.md §3.4, §3.7: built on GAIE v1.0.0, whose pkg/epp/util/request/body.go skips parts-array content as v1.0.1 does',
  },
];

/** The component that reads the prompt for a kind of front end, and its configured version. */
export function promptReader(
  config: LabConfig,
  frontEnd: FrontEndKind,
): { component: string; version: string } | undefined {
  switch (frontEnd) {
    case 'service':
      return undefined;
    case 'router':
      return { component: 'vllm-router', version: config.router.version };
    case 'epp':
    case 'ai-gateway':
      // The AI Gateway hands the request to a GAIE EPP over ext_proc; the EPP parses the body.
      return { component: 'GAIE EPP', version: imageVersion(config.gaie.eppImage) };
    case 'llmd':
      return { component: 'llm-d inference scheduler', version: imageVersion(config.llmd.eppImage) };
  }
}

/**
 * Why a prefix-aware front end cannot see the prompt over this API, as every table and chart
 * labels its runs; undefined when it can. A version without a source-checked fact is not assumed
 * to see the prompt.
 */
export function promptBlindLabel(config: LabConfig, frontEnd: FrontEndKind, api: Api): string | undefined {
  const reader = promptReader(config, frontEnd);
  if (!reader) return undefined;
  const fact = PROMPT_VISIBILITY.find(
    (f) => f.component === reader.component && f.version === reader.version,
  );
  const what = api === 'chat' ? 'chat content' : 'completions prompt';
  if (!fact) {
    return `prompt visibility unknown (no source-checked fact for ${reader.component} ${reader.version}; lib/study/prompt-visibility.ts)`;
  }
  return fact[api] ? undefined : `prompt-blind (${what} not read by ${reader.component} ${reader.version})`;
}

/** The tag of a pinned image (`registry/epp:v1.0.1` -> `v1.0.1`), or the whole reference for a digest. */
function imageVersion(image: string): string {
  if (image.includes('@')) return image.slice(image.indexOf('@') + 1);
  const last = image.slice(image.lastIndexOf('/') + 1);
  return last.includes(':') ? last.slice(last.indexOf(':') + 1) : image;
}
