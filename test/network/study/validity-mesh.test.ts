import { describe, expect, it } from 'vitest';
import type { MtlsCaseResult } from '../../../lib/network/study/model.ts';
import {
  mtlsEvidenceCheck,
  mtlsMatrixCheck,
  mtlsMatrixCompleteCheck,
  mtlsVerdict,
  sidecarCheck,
} from '../../../lib/network/study/validity.ts';
import { matrixSpec, pod, strictCase } from './validity-kit.ts';

// The mesh: sidecars where they belong, mTLS evidence and the E2/E8 matrix (validity.ts).

describe('sidecarCheck', () => {
  const meshPods = [pod('fortio-client-x', 'mesh', true), pod('fortio-server-0', 'mesh', true)];
  const plainPods = [pod('fortio-client-y', 'plain', false), pod('fortio-server-1', 'plain', false)];

  it('passes sidecars on mesh arms and none on plain arms, on the cell node', () => {
    expect(sidecarCheck('mesh-mtls', 'sidecar', meshPods, 'ip-10-0-1-23')).toEqual([]);
    expect(sidecarCheck('plain', 'sidecar', plainPods, 'ip-10-0-1-23')).toEqual([]);
    expect(sidecarCheck(undefined, 'none', plainPods, 'ip-10-0-1-23')).toEqual([]);
  });

  it('fails a mesh pod without the sidecar and a plain pod with one', () => {
    expect(
      sidecarCheck(
        'mesh-mtls',
        'sidecar',
        [meshPods[0], pod('fortio-server-0', 'mesh', false)],
        'ip-10-0-1-23',
      ),
    ).toEqual([
      'pod mesh/fortio-server-0 of the mesh-mtls arm has no istio-proxy native sidecar (was it created before the namespace label?)',
    ]);
    expect(sidecarCheck('plain', 'sidecar', [pod('fortio-client-y', 'plain', true)], 'ip-10-0-1-23')).toEqual(
      ['pod plain/fortio-client-y has an istio-proxy sidecar, which the plain arm must not have'],
    );
    expect(sidecarCheck('mesh-mtls', 'ambient', meshPods.slice(0, 1), 'ip-10-0-1-23')).toEqual([
      'pod mesh/fortio-client-x has an istio-proxy sidecar, which the mesh-mtls arm of an ambient cell must not have',
    ]);
  });

  it('fails a pod on another node and a run without pod evidence', () => {
    expect(
      sidecarCheck('plain', 'none', [pod('fortio-client-y', 'plain', false, 'ip-10-0-2-9')], 'ip-10-0-1-23'),
    ).toEqual(["pod plain/fortio-client-y ran on node ip-10-0-2-9, not the cell's node ip-10-0-1-23"]);
    expect(sidecarCheck('plain', 'none', [], 'ip-10-0-1-23')).toEqual([
      'no pod evidence was recorded: sidecars and node placement cannot be checked',
    ]);
  });
});

describe('mtlsEvidenceCheck and mtlsVerdict', () => {
  const calls = 12_496;
  const l4 = (byPolicy: Record<string, number> | undefined, reporter?: 'sidecar' | 'ztunnel') => ({
    requestsBySecurityPolicy: {},
    tcpConnectionsOpened: Object.values(byPolicy ?? {}).reduce((a, b) => a + b, 16),
    ...(byPolicy ? { tcpConnectionsBySecurityPolicy: byPolicy } : {}),
    ...(reporter ? { reporter } : {}),
  });

  it('proves mutual_tls growth for mTLS-on arms, none for mTLS-off, mutual_tls connections for L4', () => {
    const mtls = { requestsBySecurityPolicy: { mutual_tls: calls + 16 }, tcpConnectionsOpened: 16 };
    expect(mtlsVerdict('mesh-mtls', 'sidecar', mtls, calls)).toEqual({ proof: 'proven', reasons: [] });
    expect(mtlsEvidenceCheck('mesh-l7', 'sidecar', mtls, calls)).toEqual([]);
    const off = { requestsBySecurityPolicy: { none: calls + 16 }, tcpConnectionsOpened: 16 };
    expect(mtlsEvidenceCheck('mesh-mtls-off', 'sidecar', off, calls)).toEqual([]);
    expect(mtlsVerdict('mesh-l4', 'sidecar', l4({ mutual_tls: 16 }), calls)).toEqual({
      proof: 'proven',
      reasons: [],
    });
    expect(mtlsVerdict('plain', 'sidecar', undefined, calls)).toBeUndefined();
    expect(mtlsVerdict('mesh-mtls', 'none', undefined, calls)).toBeUndefined();
  });

  it('an L4 arm is unproven without the policy label or without mutual_tls connections, contradicted by plaintext ones', () => {
    // A connection count alone (older records, or a counter without the label) proves nothing.
    const bare = mtlsVerdict('mesh-l4', 'sidecar', l4(undefined), calls);
    expect(bare?.proof).toBe('unproven');
    expect(bare?.reasons).toEqual([
      "mTLS unproven: istio_tcp_connections_opened_total was recorded without its connection_security_policy, so the mesh-l4 run's connections may have been plaintext",
    ]);
    expect(mtlsVerdict('mesh-l4', 'sidecar', l4({ '(no label)': 16 }), calls)).toEqual({
      proof: 'unproven',
      reasons: [
        'mTLS unproven: istio_tcp_connections_opened_total{connection_security_policy="mutual_tls"} did not grow over the mesh-l4 run (32 connections counted in all)',
      ],
    });
    expect(mtlsVerdict('mesh-l4', 'sidecar', l4({ none: 16 }), calls)).toEqual({
      proof: 'contradicted',
      reasons: [
        'istio_tcp_connections_opened_total grew by 16 under connection_security_policy="none" (and 0 under mutual_tls) over the mesh-l4 run: its connections were not all mutual TLS',
      ],
    });
    // One stray plaintext connection beside a thousand mTLS ones is within the tolerance.
    expect(mtlsVerdict('mesh-l4', 'sidecar', l4({ mutual_tls: 1000, none: 1 }), calls)?.proof).toBe('proven');
  });

  it("ambient: ztunnel's mutual_tls connections prove every arm; its unknown (a plaintext passthrough) contradicts", () => {
    expect(mtlsVerdict('mesh-mtls', 'ambient', l4({ mutual_tls: 16 }, 'ztunnel'), calls)?.proof).toBe(
      'proven',
    );
    const passthrough = mtlsVerdict('mesh-mtls', 'ambient', l4({ unknown: 16 }, 'ztunnel'), calls);
    expect(passthrough?.proof).toBe('contradicted');
    expect(passthrough?.reasons[0]).toContain(
      "istio_tcp_connections_opened_total (ztunnel's) grew by 16 under",
    );
    // A sidecar's unknown is the source side's label, not plaintext: no proof, no contradiction.
    expect(mtlsVerdict('mesh-l4', 'sidecar', l4({ unknown: 16 }), calls)?.proof).toBe('unproven');
    expect(mtlsVerdict('mesh-mtls', 'ambient', undefined, calls)).toEqual({
      proof: 'unproven',
      reasons: ['mTLS unproven: no Istio metric evidence was recorded for the mesh-mtls arm'],
    });
  });

  it('contradicts plaintext on an mTLS-on arm and mTLS on an mTLS-off arm', () => {
    const plaintext = { requestsBySecurityPolicy: { none: calls + 16 }, tcpConnectionsOpened: 16 };
    expect(mtlsVerdict('mesh-mtls', 'sidecar', plaintext, calls)).toEqual({
      proof: 'contradicted',
      reasons: [
        'istio_requests_total{connection_security_policy="none"} grew by 12512 over the mesh-mtls run, which must carry none: its traffic was not mutual TLS as configured',
      ],
    });
    const encrypted = { requestsBySecurityPolicy: { mutual_tls: calls + 16 }, tcpConnectionsOpened: 16 };
    expect(mtlsEvidenceCheck('mesh-mtls-off', 'sidecar', encrypted, calls)[0]).toBe(
      'istio_requests_total{connection_security_policy="mutual_tls"} grew by 12512 over the mesh-mtls-off run, which must carry none: its traffic was not plaintext as configured',
    );
  });

  it('a one-request run (a download) whose request the sidecar did not count is unproven', () => {
    const one = { requestsBySecurityPolicy: { mutual_tls: 1 }, tcpConnectionsOpened: 1 };
    expect(mtlsEvidenceCheck('mesh-mtls', 'sidecar', one, 1)).toEqual([]);
    expect(
      mtlsEvidenceCheck('mesh-mtls', 'sidecar', { requestsBySecurityPolicy: {}, tcpConnectionsOpened: 1 }, 1),
    ).toEqual([
      'mTLS unproven: istio_requests_total{connection_security_policy="mutual_tls"} grew by 0, not by the run\'s 1 call',
    ]);
  });

  it('fails an L4 arm whose sidecar parsed HTTP, and missing evidence', () => {
    const parsed = {
      requestsBySecurityPolicy: { mutual_tls: calls },
      tcpConnectionsOpened: 16,
      tcpConnectionsBySecurityPolicy: { mutual_tls: 16 },
    };
    expect(mtlsEvidenceCheck('mesh-l4', 'sidecar', parsed, calls)).toEqual([
      'istio_requests_total grew by 12496 over the L4 run: the sidecar parsed HTTP on the tcp- port, so this is not an L4 relay',
    ]);
    expect(mtlsEvidenceCheck('mesh-mtls', 'sidecar', undefined, calls)).toEqual([
      'mTLS unproven: no Istio metric evidence was recorded for the mesh-mtls arm',
    ]);
  });
});

describe('mtlsMatrixCheck and mtlsMatrixCompleteCheck', () => {
  it('passes observed outcomes equal to the expected ones', () => {
    expect(mtlsMatrixCheck([strictCase])).toEqual([]);
    expect(mtlsMatrixCompleteCheck(matrixSpec, [strictCase])).toEqual([]);
  });

  it('finds a deviation: STRICT answered 403 instead of dropping the connection', () => {
    const deviation: MtlsCaseResult = { ...strictCase, observed: { httpCode: '403', curlExit: 0 } };
    expect(mtlsMatrixCheck([deviation])).toEqual([
      'mTLS case strict-out-of-mesh: expected HTTP 000 with curl exit 56, observed HTTP 403 with curl exit 0',
    ]);
  });

  it('fails a case that was not observed or has no result', () => {
    expect(mtlsMatrixCompleteCheck(matrixSpec, [{ ...strictCase, observed: null }])).toEqual([
      'mTLS case strict-out-of-mesh was not observed (its curl left no outcome)',
    ]);
    expect(mtlsMatrixCompleteCheck(matrixSpec, [])).toEqual(['mTLS case strict-out-of-mesh has no result']);
  });
});
