import { imageTagProblem } from '../../config/fields.ts';
import { flagValue } from '../command-line.ts';
import {
  clusterNamed,
  clusters,
  type EnvoyConfig,
  envoyConfigFile,
  envoyConfigs,
  extProcClusterName,
  extProcFilters,
  findAll,
  usesHttp2,
} from '../envoy-config.ts';
import { fieldPath, isRecord, type Json, list, objectRef, record, text } from '../manifest.ts';
import { findObject, type Testbed } from '../testbed.ts';
import { SCHEMA, type Violation, violation } from '../violation.ts';

/** Lesson 6: the standalone Envoy in front of the EPP (docs/facts.md §3.5). */

export const BODY_MODE = 'FULL_DUPLEX_STREAMED';
/** Response body modes that keep SSE streaming: the EPP's full duplex, or not sending the body at all. */
export const RESPONSE_BODY_MODES = [BODY_MODE, 'NONE'];
/**
 * Floor of ext_proc's message_timeout: the study's longest streamed response (128 tokens at
 * concurrency 32 finishes in seconds; 60s leaves room for a loaded node) when routes allow longer.
 */
export const MIN_MESSAGE_TIMEOUT_SECONDS = 60;
/** Envoy's route timeout when a route sets none (RouteAction.timeout). */
const ENVOY_DEFAULT_ROUTE_TIMEOUT_SECONDS = 15;
export const DESTINATION_HEADER = 'x-gateway-destination-endpoint';
/** Levels that keep logging off the request path; trace/debug/info cost CPU under load. */
export const QUIET_LOG_LEVELS = ['warn', 'warning', 'error', 'critical', 'off'];

/** Lesson 6: the Envoy container is pinned, sized and quiet, and its configuration is present. */
export function envoyContainer(testbed: Testbed): Violation[] {
  return testbed.envoys.flatMap((ref) => {
    const object = ref.pod.object;
    const found: Violation[] = [];
    const tagProblem = imageTagProblem(ref.image);
    if (tagProblem) {
      found.push(
        violation(
          object,
          `${ref.path}.image`,
          6,
          `${ref.image} ${tagProblem}: an unpinned Envoy makes two runs of the same study use different proxies`,
        ),
      );
    }
    const words = ref.invocations.flatMap((invocation) => invocation.words);
    const field = ref.invocations[0]?.field ?? `${ref.path}.args`;
    if (flagValue(words, '--concurrency') === undefined) {
      found.push(
        violation(
          object,
          field,
          6,
          '--concurrency is not set: Envoy starts one worker per host core (48 on the lab host) and oversubscribes its cgroup',
        ),
      );
    }
    const level = flagValue(words, '--log-level', '-l');
    if (level === undefined || !QUIET_LOG_LEVELS.includes(level)) {
      const actual = level === undefined ? 'is not set (Envoy logs at info)' : `is ${level}`;
      found.push(
        violation(
          object,
          field,
          6,
          `--log-level ${actual}: per-request logging eats CPU under load and skews latency; use warn`,
        ),
      );
    }
    const config = envoyConfigFile(ref);
    if (!config) {
      found.push(
        violation(
          object,
          field,
          6,
          'has no -c configuration file: Envoy would start without the ext_proc filter',
        ),
      );
    } else if (!config.mount) {
      found.push(
        violation(
          object,
          `${ref.path}.volumeMounts`,
          6,
          `-c ${config.path} is not mounted from a ConfigMap: its configuration cannot be checked`,
        ),
      );
    } else {
      const configMap = findObject(testbed, 'ConfigMap', config.mount.configMap, ref.pod.namespace);
      const key = config.mount.key;
      if (!configMap || key === undefined || text(record(configMap.data)[key]) === undefined) {
        const where = configMap
          ? `${objectRef(configMap)} has no key ${key ?? 'for it'}`
          : `ConfigMap ${config.mount.configMap} is not among the manifests`;
        found.push(
          violation(object, config.mount.volumeField, 6, `-c ${config.path}: ${where}; Envoy cannot start`),
        );
      }
    }
    return found;
  });
}

/** Lesson 6: ext_proc, ORIGINAL_DST and the ext_proc cluster as the EPP needs them. */
export function envoyConfiguration(testbed: Testbed): Violation[] {
  return envoyConfigs(testbed).flatMap(checkEnvoyConfig);
}

function checkEnvoyConfig({ configMap, key, config, parseError }: EnvoyConfig): Violation[] {
  const at = (...path: (string | number)[]) => fieldPath(['data', key, ...path]);
  if (!config) return [violation(configMap, at(), SCHEMA, `Envoy configuration ${parseError ?? 'is empty'}`)];
  const found: Violation[] = [];
  const add = (path: (string | number)[], message: string) =>
    found.push(violation(configMap, at(...path), 6, message));
  const filters = extProcFilters(config);
  if (filters.length === 0) {
    add(
      ['static_resources'],
      'has no envoy.filters.http.ext_proc filter: the EPP never sees a request and cannot pick endpoints',
    );
  }
  const routeLimit = longestRouteTimeout(config);
  for (const filter of filters) {
    const typed = record(filter.node.typed_config);
    const modes = record(typed.processing_mode);
    const modeField = (mode: string) => [...filter.path, 'typed_config', 'processing_mode', mode];
    if (modes.request_body_mode !== BODY_MODE) {
      add(
        modeField('request_body_mode'),
        `is ${String(modes.request_body_mode ?? 'not set (NONE)')}, not ${BODY_MODE}: the EPP must read the request body to pick by prefix`,
      );
    }
    // NONE (the default) is fine: the EPP picks on the request; BUFFERED/STREAMED would hold or
    // chop an SSE response the EPP does not need to see.
    const response = modes.response_body_mode ?? 'NONE';
    if (!RESPONSE_BODY_MODES.includes(String(response))) {
      add(
        modeField('response_body_mode'),
        `is ${String(response)}: use ${RESPONSE_BODY_MODES.join(' or ')}, so SSE responses keep streaming through the filter`,
      );
    }
    // Envoy refuses to load these (ext_proc config.cc verifyProcessingModeConfig, Envoy v1.35).
    for (const direction of ['request', 'response'] as const) {
      if (modes[`${direction}_body_mode`] !== BODY_MODE) continue;
      const trailer = modes[`${direction}_trailer_mode`];
      if (trailer !== 'SEND') {
        add(
          modeField(`${direction}_trailer_mode`),
          `is ${String(trailer ?? 'not set (DEFAULT)')} while ${direction}_body_mode is ${BODY_MODE}: Envoy rejects the configuration ("the ${direction}_trailer_mode has to be set to SEND") and does not start`,
        );
      }
    }
    const fullDuplex = modes.request_body_mode === BODY_MODE || modes.response_body_mode === BODY_MODE;
    if (fullDuplex && typed.failure_mode_allow === true) {
      add(
        [...filter.path, 'typed_config', 'failure_mode_allow'],
        `is true with ${BODY_MODE}: Envoy rejects the configuration ("the failure_mode_allow has to be left as false") and does not start`,
      );
    }
    const timeout = durationSeconds(typed.message_timeout);
    const needed = Math.max(routeLimit.seconds, MIN_MESSAGE_TIMEOUT_SECONDS);
    if (timeout === undefined || timeout < needed) {
      const actual =
        typed.message_timeout === undefined
          ? 'not set (200ms)'
          : timeout === undefined
            ? `${JSON.stringify(typed.message_timeout)}, not a duration`
            : String(typed.message_timeout);
      add(
        [...filter.path, 'typed_config', 'message_timeout'],
        `is ${actual}: a streamed response may last as long as the route allows (${routeLimit.what}), and an ext_proc exchange that times out first fails the request; set at least ${needed}s`,
      );
    }
    const name = extProcClusterName(filter.node);
    const cluster = clusterNamed(config, name);
    if (!cluster) {
      add(
        [...filter.path, 'typed_config', 'grpc_service', 'envoy_grpc', 'cluster_name'],
        `names cluster ${name ?? '(none)'}, which static_resources.clusters does not define`,
      );
      continue;
    }
    if (!usesHttp2(cluster.node)) {
      add(
        cluster.path,
        `ext_proc cluster ${name} has no http2_protocol_options: ext_proc is gRPC and needs HTTP/2 to the EPP`,
      );
    }
    if (list(cluster.node.health_checks).length > 0) {
      add(
        [...cluster.path, 'health_checks'],
        `actively health-checks the EPP on its ext_proc port: the EPP serves gRPC health on 9003 (on 9002 only with --health-checking=true), so the cluster is marked unhealthy`,
      );
    }
  }
  const originalDst = clusters(config).filter((cluster) => cluster.node.type === 'ORIGINAL_DST');
  if (originalDst.length === 0) {
    add(
      ['static_resources', 'clusters'],
      `has no ORIGINAL_DST cluster: requests cannot go where the EPP's ${DESTINATION_HEADER} header says`,
    );
  }
  for (const cluster of originalDst) {
    const lb = cluster.node.original_dst_lb_config;
    const options = record(lb);
    if (!isRecord(lb) || options.use_http_header !== true) {
      add(
        [...cluster.path, 'original_dst_lb_config', 'use_http_header'],
        `is not true: Envoy routes by the connection's original address, not the EPP's choice`,
      );
    }
    if (options.http_header_name !== DESTINATION_HEADER) {
      add(
        [...cluster.path, 'original_dst_lb_config', 'http_header_name'],
        `is ${String(options.http_header_name ?? 'not set')}, not ${DESTINATION_HEADER}: the header the EPP sets is ignored`,
      );
    }
  }
  return found;
}

/** Seconds of a protobuf Duration as YAML writes it (`1000s`, `1.5s`, or `{seconds, nanos}`). */
export function durationSeconds(value: unknown): number | undefined {
  if (typeof value === 'string') {
    const match = /^(\d+(?:\.\d+)?)s$/.exec(value.trim());
    return match ? Number(match[1]) : undefined;
  }
  if (isRecord(value) && (typeof value.seconds === 'number' || typeof value.seconds === 'string')) {
    return Number(value.seconds) + (typeof value.nanos === 'number' ? value.nanos / 1e9 : 0);
  }
  return undefined;
}

/**
 * The longest time a route lets a response last: its `timeout` (Envoy's default 15s when unset);
 * `0s` disables it, which the floor then stands for.
 */
function longestRouteTimeout(config: Json): { seconds: number; what: string } {
  const routes = findAll(
    config,
    (node) => isRecord(node.route) && text(record(node.route).cluster) !== undefined,
  );
  let longest = { seconds: 0, what: 'no route found' };
  for (const { node } of routes) {
    const timeout = record(node.route).timeout;
    const seconds = timeout === undefined ? ENVOY_DEFAULT_ROUTE_TIMEOUT_SECONDS : durationSeconds(timeout);
    if (seconds === undefined) continue;
    if (seconds === 0) return { seconds: 0, what: 'a route timeout of 0s, no limit' };
    if (seconds > longest.seconds) {
      longest = {
        seconds,
        what: `route timeout ${timeout === undefined ? '15s (Envoy default)' : String(timeout)}`,
      };
    }
  }
  return longest;
}
