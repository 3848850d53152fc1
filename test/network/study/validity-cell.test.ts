import { describe, expect, it } from 'vitest';
import { proberResult } from '../../../lib/network/probes/service-prober.ts';
import type {
  ConntrackResult,
  ConntrackRunSpec,
  DatapathEvidence,
  ServiceScaleResult,
} from '../../../lib/network/study/model.ts';
import {
  conntrackCheck,
  datapathCheck,
  downloadCheck,
  hostFactsCheck,
  serviceScaleCheck,
  sseCheck,
} from '../../../lib/network/study/validity.ts';
import { host, samples, scaleSpec, spread } from './validity-kit.ts';

// The other kinds and the cell: downloads, SSE, the datapath, E9, E10 and the host (validity.ts).

describe('downloadCheck and sseCheck', () => {
  const spec = {
    kind: 'download',
    arm: 'plain',
    clientNamespace: 'plain',
    url: 'u',
    bytes: 104_857_600,
  } as const;
  const download = {
    httpCode: '200',
    curlExit: 0,
    sizeDownloadBytes: 104_857_600,
    speedDownloadBytesPerSecond: 1.2e9,
    timeTotalSeconds: 0.087,
  };
  it('passes a complete 200 download and fails a truncated one', () => {
    expect(downloadCheck(spec, download)).toEqual([]);
    expect(downloadCheck(spec, { ...download, curlExit: 18, sizeDownloadBytes: 52_000_000 })).toEqual([
      'the download ended with HTTP 200 and curl exit 18, not 200 and 0',
      'the download delivered 52000000 bytes, not the planned 104857600',
    ]);
  });

  const sseSpec = {
    kind: 'sse',
    arm: 'plain',
    clientNamespace: 'plain',
    url: 'u',
    events: 200,
    intervalMs: 20,
  } as const;
  const gaps = { count: 199, minMs: 19.1, meanMs: 20, p50Ms: 20, p90Ms: 20.4, p99Ms: 21.2, maxMs: 22 };
  const sse = {
    probe: 'sse-client' as const,
    url: 'u',
    status: 200,
    events: 200,
    expectedEvents: 200,
    connectMs: 0.3,
    firstEventMs: 1.1,
    durationMs: 3990,
    gaps,
    errors: [],
  };
  it('passes a full SSE stream and fails a cut-off one', () => {
    expect(sseCheck(sseSpec, sse)).toEqual([]);
    expect(sseCheck(sseSpec, { ...sse, events: 120, errors: ['received 120 of 200 events'] })).toEqual([
      'the SSE client received 120 of 200 events',
      'SSE client: received 120 of 200 events',
    ]);
  });
});

describe('datapathCheck', () => {
  const cilium: DatapathEvidence = {
    kubeProxyReplacement: true,
    kubeSvcChains: 0,
    nftKubeProxyTable: false,
    ipvsServices: 0,
  };
  const iptables: DatapathEvidence = {
    kubeProxyReplacement: null,
    kubeSvcChains: 4,
    nftKubeProxyTable: false,
    ipvsServices: 0,
  };

  it('passes Cilium with the replacement and no kube-proxy rules, and each kube-proxy mode with its tables', () => {
    expect(datapathCheck('cilium', cilium)).toEqual([]);
    expect(datapathCheck('iptables', iptables)).toEqual([]);
    expect(datapathCheck('nftables', { ...iptables, kubeSvcChains: 0, nftKubeProxyTable: true })).toEqual([]);
    expect(datapathCheck('ipvs', { ...iptables, kubeSvcChains: 0, ipvsServices: 3 })).toEqual([]);
  });

  it('fails Cilium without the replacement or with kube-proxy rules beside it', () => {
    expect(
      datapathCheck('cilium', {
        ...cilium,
        kubeProxyReplacement: false,
        kubeSvcChains: 4,
        nftKubeProxyTable: true,
      }),
    ).toEqual([
      'cilium-dbg status reports KubeProxyReplacement false, not true',
      'iptables-save shows 4 KUBE-SVC chains on a Cilium cell: kube-proxy is running',
      'the kube-proxy nft table exists on a Cilium cell: kube-proxy is running',
    ]);
  });

  it('fails a kube-proxy cell whose mode tables are missing, and a cell never verified', () => {
    expect(datapathCheck('nftables', iptables)).toEqual([
      'no kube-proxy nft table on an nftables cell: kube-proxy is not in nftables mode',
    ]);
    expect(datapathCheck('iptables', { ...iptables, kubeSvcChains: 0 })).toEqual([
      'no KUBE-SVC chains in iptables-save on an iptables cell: kube-proxy is not in iptables mode',
    ]);
    expect(datapathCheck('ipvs', iptables)).toEqual([
      'ipvsadm -Ln lists no virtual services on an ipvs cell: kube-proxy is not in ipvs mode',
    ]);
    expect(datapathCheck('iptables', undefined)).toEqual([
      'the iptables datapath was not verified on the host (no datapath evidence)',
    ]);
  });
});

describe('serviceScaleCheck', () => {
  const spec = scaleSpec;
  const scale: ServiceScaleResult = {
    servicesReady: 1000,
    entries: 2003,
    entriesCommand: 'cilium-dbg bpf lb list',
    lbMapFull: false,
    prober: proberResult(20, 10_000, samples(spread)),
  };
  const earlier = [
    { services: 0, entries: 3 },
    { services: 100, entries: 203 },
  ];

  it('passes a step with every Service ready, growing entries and unquantized samples', () => {
    expect(serviceScaleCheck(spec, scale, earlier, 'cilium', 65_536)).toEqual([]);
  });

  it('fails a pod-start measurement (first-attempt connects) and samples of the old order without a start', () => {
    const podStart = samples(spread).map((sample) => ({
      ...sample,
      latencyMs: 4_000 + (sample.latencyMs ?? 0),
      firstAttemptAfterMs: 4_000,
      attempts: 1,
      attemptsAfterStart: 1,
      timedOut: 0,
      refused: 0,
      timeoutStepMs: null,
    }));
    const reasons = serviceScaleCheck(
      spec,
      { ...scale, prober: proberResult(20, 10_000, podStart) },
      earlier,
      'cilium',
      65_536,
    );
    expect(reasons[0]).toBe(
      "E9 method: 20 of 20 samples connected on the prober's first attempt: the prober started after the Service was programmed, so the samples time the prober's start, not the datapath",
    );
    const oldOrder = samples(spread).map(
      ({ attemptsAfterStart: _a, resolutionMs: _r, timeoutStepMs: _t, ...old }) => old,
    );
    expect(
      serviceScaleCheck(
        spec,
        { ...scale, prober: proberResult(20, 10_000, oldOrder) },
        earlier,
        'cilium',
        65_536,
      ),
    ).toEqual([
      "the prober's samples were timed from before the prober ran (Services created first): they include the prober's start, not only the datapath",
    ]);
  });

  it('fails Services not ready, entries that did not grow, and an LB map near full', () => {
    const bad = { ...scale, servicesReady: 940, entries: 203, lbMapFull: true };
    expect(serviceScaleCheck(spec, bad, earlier, 'cilium', 150)).toEqual([
      '940 of 1000 Services had a ready endpoint when measuring',
      'entries did not grow with the Services: 203 at 1000 Services, 203 at 100 (cilium-dbg bpf lb list)',
      '203 LB map entries reach bpf.lbMapMax 150: the map is full',
      'the Cilium agent logged "map full" during the step',
    ]);
    expect(serviceScaleCheck(spec, { ...scale, lbMapFull: undefined }, [], 'cilium', 65_536)).toEqual([
      'the Cilium agent\'s log was not checked for "map full"',
    ]);
  });

  it('fails samples that never connected and a missing prober result', () => {
    const failed = samples(spread).map((sample, index) =>
      index < 2 ? { ...sample, connected: false, latencyMs: null } : sample,
    );
    expect(
      serviceScaleCheck(spec, { ...scale, prober: proberResult(20, 10_000, failed) }, [], 'iptables', 0),
    ).toEqual(['2 of 20 prober samples never connected within 10000 ms']);
    expect(serviceScaleCheck(spec, { ...scale, prober: null }, [], 'iptables', 0)).toEqual([
      'the service prober left no result',
    ]);
  });
});

describe('conntrackCheck', () => {
  const spec: ConntrackRunSpec = {
    kind: 'conntrack',
    limit: 2048,
    connections: 4000,
    connectTimeoutSeconds: 5,
    baselineMax: 500,
  };
  const driver = {
    probe: 'conntrack-driver' as const,
    target: '127.0.0.1:40123',
    connections: 4000,
    connectTimeoutMs: 5000,
    holdMs: 2000,
    succeeded: 1801,
    failed: 2199,
    failures: { timeout: 2199 },
    connect: null,
    droppedDuringHold: 0,
    issuedInMs: 180,
    openFilesLimit: 1_048_576,
  };
  const result: ConntrackResult = {
    limitBefore: 262_144,
    limit: 2048,
    baseline: 231,
    limitAfterRestore: 262_144,
    driver,
  };

  it('passes a step whose successes are about limit - baseline and whose limit was restored', () => {
    // 2048 - 231 = 1817 expected; 1801 is within the tolerance of 182.
    expect(conntrackCheck(spec, result)).toEqual([]);
    const atDefault = {
      ...result,
      limit: 262_144,
      driver: { ...driver, succeeded: 4000, failed: 0, failures: {} },
    };
    expect(conntrackCheck({ ...spec, limit: 'default' }, atDefault)).toEqual([]);
  });

  it('fails a high baseline, a limit not restored and successes far from limit - baseline', () => {
    const bad = { ...result, baseline: 620, limitAfterRestore: 2048, driver: { ...driver, succeeded: 3100 } };
    expect(conntrackCheck(spec, bad)).toEqual([
      '620 conntrack entries existed when the step started, not fewer than 500',
      'nf_conntrack_max is 2048 after the step, not restored to 262144',
      '3100 of 4000 connections succeeded, expected about 1428 (limit 2048 - baseline 620, capped at the connections; allowed +-143)',
    ]);
  });

  it('fails failures of the driver itself, an unconfirmed restore and the wrong limit', () => {
    const emfile = { ...driver, failures: { timeout: 1175, emfile: 1024 } };
    expect(conntrackCheck(spec, { ...result, limit: 4096, limitAfterRestore: null, driver: emfile })).toEqual(
      [
        'nf_conntrack_max was 4096 during the step, not the planned 2048',
        'nf_conntrack_max was not read back after the step: the restore to 262144 is unconfirmed',
        '1024 connections failed with emfile, a limit of the driver (open files 1048576) or of local ports, not of conntrack',
        '1801 of 4000 connections succeeded, expected about 3865 (limit 4096 - baseline 231, capped at the connections; allowed +-387)',
      ],
    );
  });
});

describe('hostFactsCheck', () => {
  it('passes a host with every fact and version recorded', () => {
    expect(hostFactsCheck(host, ['k3s', 'fortio', 'netshoot', 'istio'])).toEqual([]);
  });

  it('fails missing facts and versions', () => {
    expect(
      hostFactsCheck({ ...host, kernel: '', versions: { k3s: 'v1.36.4+k3s1' } }, ['k3s', 'fortio', 'istio']),
    ).toEqual(["the host's kernel was not recorded", 'no version recorded for fortio, istio']);
    expect(hostFactsCheck(undefined, ['k3s'])).toEqual([
      'the host facts (instance type, AZ, kernel, CPU flags, versions) were not recorded',
    ]);
  });
});
