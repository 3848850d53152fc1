import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import { Construct } from 'constructs';
import { labPlacement, type NodePool } from '../lib/config/placement.ts';
import { ROUTER_HEALTH_CHECK_INTERVAL_SECS } from '../lib/config/router-defaults.ts';
import type { LabConfig, RouterVariant } from '../lib/config/schema.ts';
import { pairSuffix, studyPairs } from '../lib/study/pairs.ts';
import { REQUESTS } from '../lib/study/resources.ts';
import { MODEL_CACHE_HOST_PATH, ROUTER_PORT, replicaUrls, routerName } from '../lib/study/topology.ts';
import { COMPONENT_LABEL, containerResources, podPlacement, port, rootContainerSecurity } from './common.ts';

/** Prometheus port of vllm-router (its default; only the host is overridden). */
export const ROUTER_METRICS_PORT = 29000;

/** Where the router container sees the host cache's wheelhouse of its pinned version. */
export const ROUTER_WHEELHOUSE_MOUNT = '/wheels';

/**
 * The host folder with the pinned vllm-router wheel and every dependency's wheel, for the
 * router container's Python (the base image's). The bootstrap stages it once per host
 * (`pip download --only-binary=:all:`), so a router restart installs offline in seconds instead
 * of resolving and downloading from PyPI each time (issue 11).
 */
export function routerWheelhouse(version: string): string {
  return `${MODEL_CACHE_HOST_PATH}/wheels/vllm-router-${version}`;
}

/**
 * The router's start: install the pinned version offline from the wheelhouse (`--no-index`)
 * when the host cache has its wheel, else from PyPI, saying so; then exec the router. The
 * wheel's file name starts with the normalized project name (`vllm_router-<version>-`).
 */
export function routerStartScript(version: string, argv: readonly string[]): string {
  const hostPath = routerWheelhouse(version);
  const install = [
    `if ls ${ROUTER_WHEELHOUSE_MOUNT}/vllm_router-${version}-*.whl >/dev/null 2>&1; then`,
    `pip install --no-cache-dir --no-index --find-links ${ROUTER_WHEELHOUSE_MOUNT} vllm-router==${version};`,
    `else echo "no vllm-router ${version} wheel in ${hostPath}: installing from PyPI" >&2;`,
    `pip install --no-cache-dir vllm-router==${version}; fi`,
  ].join(' ');
  return `${install} && exec vllm-router ${argv.map(shellWord).join(' ')}`;
}

export interface RouterArmProps {
  /** Deployment and Service name (`vllm-router-<variant>`). */
  readonly name: string;
  /** The policy and its cache_aware thresholds. */
  readonly variant: RouterVariant;
  /** Base image the router is pip-installed into. */
  readonly image: string;
  /** Exact PyPI version of `vllm-router`. */
  readonly version: string;
  /** Stable replica URLs (headless Service DNS), never the kube-proxy Service. */
  readonly workerUrls: readonly string[];
  /**
   * Nodes the pod may run on (nodeSelector and tolerations).
   * @default - any node
   */
  readonly nodePool?: NodePool;
}

/** Flags of the cache_aware thresholds that are set on a variant, in a fixed order. */
function thresholdArgs(variant: RouterVariant): string[] {
  const flags: [string, number | undefined][] = [
    ['--cache-threshold', variant.cacheThreshold],
    ['--balance-abs-threshold', variant.balanceAbsThreshold],
    ['--balance-rel-threshold', variant.balanceRelThreshold],
    ['--eviction-interval-secs', variant.evictionIntervalSecs],
    ['--max-tree-size', variant.maxTreeSize],
  ];
  return flags.flatMap(([flag, value]) => (value === undefined ? [] : [flag, String(value)]));
}

/**
 * The `vllm-router` command line (docs/facts.md §3.3). Host, port and metrics host are overridden:
 * the defaults (127.0.0.1, 30000, metrics on 127.0.0.1) are unreachable from other pods. The
 * health-check interval is given, not left to the default: the planner's load-counter resets follow
 * it (ROUTER_HEALTH_CHECK_INTERVAL_SECS), and the default was read only at releases around 0.1.15.
 */
export function routerArgs(props: Pick<RouterArmProps, 'variant' | 'workerUrls'>): string[] {
  if (props.workerUrls.length === 0) throw new Error('vllm-router needs at least one worker URL');
  return [
    '--host',
    '0.0.0.0',
    '--port',
    String(ROUTER_PORT),
    '--policy',
    props.variant.policy,
    '--worker-urls',
    ...props.workerUrls,
    '--prometheus-host',
    '0.0.0.0',
    '--health-check-interval-secs',
    String(ROUTER_HEALTH_CHECK_INTERVAL_SECS),
    ...thresholdArgs(props.variant),
  ];
}

/** Shell-quotes one word for `sh -c`. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * One vllm-router variant as its own Deployment and Service, so switching arms needs no
 * reconfiguration. There is no official image: the pinned PyPI package is installed at start.
 */
export class RouterArm extends Construct {
  public readonly name: string;

  constructor(scope: Construct, id: string, props: RouterArmProps) {
    super(scope, id);
    if (!/^\d+\.\d+\.\d+$/.test(props.version)) {
      throw new Error(
        `RouterArm ${props.name}: version must be an exact PyPI version, got "${props.version}"`,
      );
    }
    this.name = props.name;
    const selector = { app: props.name };
    const script = routerStartScript(props.version, routerArgs(props));

    new k8s.KubeDeployment(this, 'deployment', {
      metadata: { name: props.name, labels: { [COMPONENT_LABEL]: 'router' } },
      spec: {
        replicas: 1,
        selector: { matchLabels: selector },
        // The runner restarts the router before each run; never run two prefix indexes at once.
        strategy: { type: 'Recreate' },
        template: {
          metadata: { labels: { ...selector, [COMPONENT_LABEL]: 'router' } },
          spec: {
            ...(props.nodePool ? podPlacement(props.nodePool) : {}),
            containers: [
              {
                name: 'router',
                image: props.image,
                command: ['sh', '-c', script],
                volumeMounts: [{ name: 'wheelhouse', mountPath: ROUTER_WHEELHOUSE_MOUNT, readOnly: true }],
                ports: [
                  { name: 'http', containerPort: ROUTER_PORT },
                  { name: 'metrics', containerPort: ROUTER_METRICS_PORT },
                ],
                resources: containerResources(REQUESTS.router),
                securityContext: rootContainerSecurity(),
                // 503 until at least one worker is healthy.
                readinessProbe: {
                  httpGet: { path: '/readiness', port: port(ROUTER_PORT) },
                  periodSeconds: 5,
                  failureThreshold: 3,
                },
                // The install runs before the router listens (from PyPI when the wheelhouse is
                // empty): give start-up five minutes.
                startupProbe: {
                  httpGet: { path: '/liveness', port: port(ROUTER_PORT) },
                  periodSeconds: 5,
                  failureThreshold: 60,
                },
                livenessProbe: {
                  httpGet: { path: '/liveness', port: port(ROUTER_PORT) },
                  periodSeconds: 10,
                  failureThreshold: 3,
                },
              },
            ],
            volumes: [
              {
                name: 'wheelhouse',
                // Created empty when the bootstrap staged nothing: the start script then says so.
                hostPath: { path: routerWheelhouse(props.version), type: 'DirectoryOrCreate' },
              },
            ],
          },
        },
      },
    });

    new k8s.KubeService(this, 'service', {
      metadata: { name: props.name, labels: { [COMPONENT_LABEL]: 'router' } },
      spec: {
        selector,
        ports: [
          { name: 'http', port: ROUTER_PORT, targetPort: port(ROUTER_PORT) },
          { name: 'metrics', port: ROUTER_METRICS_PORT, targetPort: port(ROUTER_METRICS_PORT) },
        ],
      },
    });
  }
}

export interface RoutersChartProps extends ChartProps {
  readonly config: LabConfig;
}

/**
 * Every vllm-router variant of the configuration, each over the standard replicas; with
 * `study.parallelism: 2` once more over the second pair's replicas (`vllm-router-<variant>-b`).
 */
export class RoutersChart extends Chart {
  constructor(scope: Construct, id: string, props: RoutersChartProps) {
    super(scope, id, props);
    const { config } = props;
    const nodePool = labPlacement(config).frontEnds;
    for (const pair of studyPairs(config)) {
      for (const variant of config.router.variants) {
        new RouterArm(this, `${variant.name}${pairSuffix(pair)}`, {
          name: routerName(variant.name, pair),
          variant,
          image: config.router.image,
          version: config.router.version,
          workerUrls: replicaUrls(config, 'standard', pair),
          nodePool,
        });
      }
    }
  }
}
