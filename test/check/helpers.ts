import { expect } from 'vitest';
import { stringify } from 'yaml';
import { checkManifests, type KubeObject, type Violation } from '../../lib/check/index.ts';
import type { Json } from '../../lib/check/manifest.ts';
import { envoyConfig, find, goodTestbed } from './fixtures.ts';

/** Builds the correct testbed, breaks it with `mutate`, and checks it. */
export function violationsAfter(mutate: (objects: KubeObject[]) => void, options = {}): Violation[] {
  const objects = goodTestbed();
  mutate(objects);
  return checkManifests(objects, options);
}

/** Exactly one violation, with this object, field, lesson and message fragment. */
export function expectOnly(
  violations: Violation[],
  object: string,
  field: string,
  lesson: number,
  fragment: string,
) {
  expect(violations).toEqual([
    expect.objectContaining({ object, field, lesson, message: expect.stringContaining(fragment) }),
  ]);
}

export const SERVER_ARGS = 'spec.template.spec.containers[0].args';
export const STS = 'StatefulSet vllm/qwen3';

/** Rewrites the Envoy configuration in its ConfigMap. */
export function editEnvoy(objects: KubeObject[], edit: (config: Json) => void) {
  const config = envoyConfig();
  edit(config);
  (find(objects, 'ConfigMap', 'envoy-config').data as Json)['envoy.yaml'] = stringify(config);
}

export const clusters = (config: Json) => (config.static_resources as { clusters: Json[] }).clusters;
export const extProcTyped = (config: Json) => {
  const listener = (config.static_resources as { listeners: Json[] }).listeners[0] as {
    filter_chains: { filters: { typed_config: { http_filters: { typed_config: Json }[] } }[] }[];
  };
  return listener.filter_chains[0].filters[0].typed_config.http_filters[0].typed_config;
};
export const EXT_PROC_PATH =
  'data["envoy.yaml"].static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters[0].typed_config';
