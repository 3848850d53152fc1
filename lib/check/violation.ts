import { fileOf, type KubeObject, objectRef } from './manifest.ts';

/** `lesson` of a schema failure: the object would not even be accepted, or not decoded. */
export const SCHEMA = 0;

/** One way in which a folder of manifests breaks a lesson of lab-spec section 5 (or a schema). */
export interface Violation {
  /** `Deployment vllm/qwen3-epp` */
  readonly object: string;
  /** `spec.template.spec.containers[0].args` */
  readonly field: string;
  /** 1-9: the lesson of lab-spec section 5; 0 (`SCHEMA`): the object fails its schema. */
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
