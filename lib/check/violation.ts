import { fileOf, type KubeObject, objectRef } from './manifest.ts';

/** `lesson` of a schema failure: the object would not even be accepted, or not decoded. */
export const SCHEMA = 0;
/** `lesson` of the AI Gateway arm's rules (docs/facts.md §3.6), which section 5 does not number. */
export const AI_GATEWAY = 10;
/** `lesson` of the resource budget: what runs at once fits the node. */
export const BUDGET = 11;
/** `lesson` of the placement rules (issue 17): which nodes replicas, clients and front ends select. */
export const PLACEMENT = 12;

/**
 * `lesson` of the network lab's rules (docs/facts.md §N2, N3): 21-27, shown as `network 1`..`network 7`
 * (1 fortio resolution, 2 namespaces, 3 protocol ports, 4 port-level mTLS, 5 DestinationRule arms,
 * 6 Cilium values, 7 exposure).
 */
export const NETWORK_LESSONS = {
  resolution: 21,
  namespaces: 22,
  protocolPorts: 23,
  portLevelMtls: 24,
  destinationRules: 25,
  ciliumValues: 26,
  exposure: 27,
  scaleBackends: 28,
} as const;
const NETWORK_LESSON_BASE = 20;

/** How output names a `lesson` value: `schema`, `lesson 5`, `ai-gateway`, `budget`, `network 3`. */
export function lessonLabel(lesson: number): string {
  if (lesson === SCHEMA) return 'schema';
  if (lesson > NETWORK_LESSON_BASE) return `network ${lesson - NETWORK_LESSON_BASE}`;
  if (lesson === AI_GATEWAY) return 'ai-gateway';
  if (lesson === BUDGET) return 'budget';
  if (lesson === PLACEMENT) return 'placement';
  return `lesson ${lesson}`;
}

/** One way in which a folder of manifests breaks a lesson of docs/facts.md §5 (or a schema). */
export interface Violation {
  /** `Deployment vllm/qwen3-epp` */
  readonly object: string;
  /** `spec.template.spec.containers[0].args` */
  readonly field: string;
  /**
   * 1-9: the lesson of docs/facts.md §5; 0 (`SCHEMA`): the object fails its schema;
   * 10 (`AI_GATEWAY`): the AI Gateway arm's wiring; 11 (`BUDGET`): the resource budget;
   * 12 (`PLACEMENT`): the nodes the pods select.
   */
  readonly lesson: number;
  /** What is wrong and why it matters to the study. */
  readonly message: string;
  readonly file?: string;
}

/** Something the checker could not judge, or that is allowed but worth knowing. Not a failure. */
export interface Note {
  readonly object: string;
  readonly message: string;
  readonly file?: string;
}

export function violation(object: KubeObject, field: string, lesson: number, message: string): Violation {
  const file = fileOf(object);
  return { object: objectRef(object), field, lesson, message, ...(file ? { file } : {}) };
}

export function note(object: KubeObject, message: string): Note {
  const file = fileOf(object);
  return { object: objectRef(object), message, ...(file ? { file } : {}) };
}
