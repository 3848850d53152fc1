import type { ProbeSample } from '../../../lib/network/probes/service-prober.ts';
import { type FortioResult, parseFortioResult } from '../../../lib/network/study/fortio-result.ts';
import type {
  CellHostFacts,
  FortioRunSpec,
  MtlsRunSpec,
  PodMeshEvidence,
  ServiceScaleRunSpec,
} from '../../../lib/network/study/model.ts';
import { type FortioFixture, fortioFixture } from './fixtures/fortio.ts';

/** What the validity tests share: fortio fixtures, run specs, pod evidence, prober samples, host facts. */

export const fixture = (name: FortioFixture): FortioResult => parseFortioResult(fortioFixture(name));
/** A fixture with some fields changed, as fortio would have written them. */
export const changed = (name: FortioFixture, patch: Record<string, unknown>): FortioResult =>
  parseFortioResult(JSON.stringify({ ...JSON.parse(fortioFixture(name)), ...patch }));

export const fixedRate: FortioRunSpec = {
  kind: 'fortio',
  arm: 'plain',
  mode: 'fixed-rate',
  clientNamespace: 'plain',
  url: 'http://fortio-server.plain:8080/echo',
  qps: 500,
  seconds: 25,
  connections: 16,
  resolutionSeconds: 0.00001,
};
export const saturation: FortioRunSpec = {
  ...fixedRate,
  arm: 'mesh-mtls',
  mode: 'saturation',
  qps: 0,
  seconds: 20,
};

export const pod = (
  name: string,
  namespace: string,
  hasSidecar: boolean,
  node = 'ip-10-0-1-23',
): PodMeshEvidence => ({
  pod: name,
  namespace,
  node,
  hasSidecar,
});

/** Prober-first samples connected after the given latencies (ms): probing since before the Service. */
export function samples(latencies: readonly number[]): ProbeSample[] {
  return latencies.map((latencyMs) => ({
    target: '10.43.0.12:80',
    connected: true,
    latencyMs,
    firstAttemptAfterMs: 7.5,
    attempts: 203,
    attemptsAfterStart: 3,
    resolutionMs: 0.4,
    timeoutStepMs: 20.2,
    refused: 2,
    timedOut: 200,
    otherErrors: {},
  }));
}

/** One E9 step at 1,000 Services, and prober latencies (ms) with no relation to its 20 ms step. */
export const scaleSpec: ServiceScaleRunSpec = {
  kind: 'service-scale',
  services: 1000,
  samples: 20,
  attemptTimeoutMs: 20,
  createConcurrency: 50,
  backendsPerService: 1,
};
export const spread = [
  3.1, 5.7, 8.2, 11.9, 4.4, 6.3, 9.8, 13.1, 7.7, 2.9, 15.4, 6.6, 10.2, 8.8, 5.1, 12.6, 7.2, 9.1, 4.9, 6.0,
];

export const host: CellHostFacts = {
  instanceType: 'c7i.2xlarge',
  availabilityZone: 'eu-west-1a',
  kernel: '6.8.0-1021-aws',
  cpuFlags: ['aes', 'vaes'],
  versions: { k3s: 'v1.36.4+k3s1', fortio: '1.75.2', netshoot: 'v0.16', istio: '1.31.1' },
};

/** E2/E8: one STRICT case, observed as expected, and a one-case matrix. */
export const strictCase = {
  id: 'strict-out-of-mesh',
  expected: { httpCode: '000', curlExit: 56 },
  observed: { httpCode: '000', curlExit: 56 },
};
export const matrixSpec: MtlsRunSpec = {
  kind: 'mtls',
  cases: [
    {
      id: 'strict-out-of-mesh',
      title: 'STRICT, out-of-mesh plaintext client',
      clientNamespace: 'plain',
      serviceAccount: 'default',
      inMesh: false,
      url: 'http://fortio-server.mesh:8080/echo',
      expected: { httpCode: '000', curlExit: 56 },
    },
  ],
};
