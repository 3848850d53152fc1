import type { LabConfig } from '../lib/config/schema.ts';
import type { ServiceObject } from '../lib/runner/ports.ts';
import { GATE_COMPONENT, gateServiceName } from '../lib/study/staging.ts';
import { BENCHMARK_LABEL } from './benchmark-job.ts';
import { COMPONENT_LABEL, labLabels } from './common.ts';

/**
 * Fields of the front end's Service spec a gate keeps, so that traffic through the gate is
 * balanced as through the front end's own Service: the ports, session affinity, the traffic
 * policies kube-proxy reads and which pods count as endpoints. Never the selector (the gate
 * starts closed), the cluster IPs (the API server assigns the gate its own), node ports or the
 * fields of external traffic (a gate is a ClusterIP Service, reached from inside the cluster).
 */
const KEPT_FIELDS = [
  'publishNotReadyAddresses',
  'sessionAffinity',
  'sessionAffinityConfig',
  'internalTrafficPolicy',
  'trafficDistribution',
  'ipFamilies',
  'ipFamilyPolicy',
] as const;

interface PortJson {
  readonly name?: string;
  readonly port: number;
  readonly targetPort?: number | string;
  readonly protocol?: string;
  readonly appProtocol?: string;
}

/**
 * The closed gate of one staged client (lib/study/staging.ts): a ClusterIP Service in the lab
 * namespace with the front end's ports and balancing, and no selector, so it has no endpoints
 * until the runner gives it the front end's selector. Pure: `frontEndSpec` is the live Service's
 * `spec` as the API returned it.
 */
export function gateService(
  config: LabConfig,
  benchmarkId: string,
  frontEndService: string,
  frontEndSpec: Readonly<Record<string, unknown>>,
): ServiceObject {
  const ports = frontEndSpec.ports as readonly PortJson[] | undefined;
  if (!ports || ports.length === 0) {
    throw new Error(`service/${frontEndService} has no ports: a gate cannot copy it`);
  }
  if (frontEndSpec.clusterIP === 'None') {
    // A headless Service's clients reach the pods by DNS, not through kube-proxy: a gate's
    // virtual IP would be another path than the front end's.
    throw new Error(
      `service/${frontEndService} is headless (clusterIP: None): a gate copies only a Service with a cluster IP`,
    );
  }
  const kept = Object.fromEntries(
    KEPT_FIELDS.filter((field) => frontEndSpec[field] !== undefined).map((field) => [
      field,
      frontEndSpec[field],
    ]),
  );
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: gateServiceName(benchmarkId),
      namespace: config.namespace,
      labels: { ...labLabels(), [COMPONENT_LABEL]: GATE_COMPONENT, [BENCHMARK_LABEL]: benchmarkId },
    },
    spec: {
      type: 'ClusterIP',
      ports: ports.map(({ name, port, targetPort, protocol, appProtocol }) => ({
        ...(name !== undefined ? { name } : {}),
        port,
        ...(targetPort !== undefined ? { targetPort } : {}),
        ...(protocol !== undefined ? { protocol } : {}),
        ...(appProtocol !== undefined ? { appProtocol } : {}),
      })),
      ...kept,
    },
  };
}

/** The label selector of every gate Service, for the cleanup of a killed runner's gates. */
export function gateSelector(): string {
  const partOf = Object.entries(labLabels()).map(([k, v]) => `${k}=${v}`);
  return [...partOf, `${COMPONENT_LABEL}=${GATE_COMPONENT}`].join(',');
}
