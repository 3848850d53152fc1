import { describe, expect, it } from 'vitest';
import { proberResult } from '../../../lib/network/probes/service-prober.ts';
import type {
  ConntrackResult,
  ConntrackRunSpec,
  DatapathEvidence,
  FortioRunSpec,
  NetworkRun,
  NetworkRunRecord,
} from '../../../lib/network/study/model.ts';
import {
  judgeNetworkRun,
  judgeRepeats,
  type NetworkJudgeConfig,
  type NetworkRunEvidence,
  repeatSpreadCheck,
} from '../../../lib/network/study/validity.ts';
import { fortioFixture } from './fixtures/fortio.ts';
import { fixedRate, host, matrixSpec, pod, samples, scaleSpec, spread, strictCase } from './validity-kit.ts';

// Repeats and the whole judgment of a run (validity.ts).

describe('repeatSpreadCheck', () => {
  it('passes repeats within 3% of their mean', () => {
    expect(
      repeatSpreadCheck('E1 plain', [
        { id: 'e1-plain-r1', meanMs: 0.428 },
        { id: 'e1-plain-r2', meanMs: 0.431 },
        { id: 'e1-plain-r3', meanMs: 0.425 },
      ]).size,
    ).toBe(0);
  });

  it('flags a repeat outside +-3%', () => {
    const flags = repeatSpreadCheck('E1 plain', [
      { id: 'e1-plain-r1', meanMs: 0.428 },
      { id: 'e1-plain-r2', meanMs: 0.431 },
      { id: 'e1-plain-r3', meanMs: 0.49 },
    ]);
    expect([...flags]).toEqual([
      [
        'e1-plain-r1',
        "repeat spread: e1-plain-r1 mean 0.428 ms is 4.8% below the 3 repeats' mean 0.450 ms of E1 plain (allowed +-3.0%)",
      ],
      [
        'e1-plain-r2',
        "repeat spread: e1-plain-r2 mean 0.431 ms is 4.2% below the 3 repeats' mean 0.450 ms of E1 plain (allowed +-3.0%)",
      ],
      [
        'e1-plain-r3',
        "repeat spread: e1-plain-r3 mean 0.490 ms is 9.0% above the 3 repeats' mean 0.450 ms of E1 plain (allowed +-3.0%)",
      ],
    ]);
  });
});

// ---- judgeNetworkRun and judgeRepeats ---------------------------------------------------------

const config: NetworkJudgeConfig = {
  datapath: 'iptables',
  mesh: 'sidecar',
  node: 'ip-10-0-1-23',
  lbMapMax: 65_536,
  requiredVersions: ['k3s', 'fortio', 'netshoot', 'istio'],
  resolutionSeconds: 0.00001,
  connections: 16,
};
const datapath: DatapathEvidence = {
  kubeProxyReplacement: null,
  kubeSvcChains: 12,
  nftKubeProxyTable: false,
  ipvsServices: 0,
};
const run = (id: string, spec: NetworkRun['spec'], repeat?: number): NetworkRun => ({
  id,
  cell: 'mesh',
  experiment: 'E1',
  title: id,
  ...(repeat === undefined ? {} : { repeat }),
  spec,
  preconditions: [],
});
const plainPods = [pod('fortio-client-a', 'plain', false), pod('fortio-server-0', 'plain', false)];
const evidence = (raw: string, pods = plainPods): NetworkRunEvidence => ({
  job: 'succeeded',
  result: { kind: 'fortio', raw },
  pods,
  host,
  datapath,
});

describe('judgeNetworkRun', () => {
  it('passes a clean plain fixed-rate run', () => {
    expect(
      judgeNetworkRun(run('e1-plain-r1', fixedRate), evidence(fortioFixture('http-fixed-rate')), config),
    ).toEqual({
      valid: true,
      invalidReasons: [],
      flags: [],
    });
  });

  it('marks the 1 ms resolution run invalid with its reasons', () => {
    const judgment = judgeNetworkRun(
      run('c-r1', fixedRate),
      evidence(fortioFixture('http-resolution-1ms')),
      config,
    );
    expect(judgment.valid).toBe(false);
    expect(judgment.invalidReasons[0]).toBe(
      'fortio ran with -r 0.001 s (Resolution), not the planned -r 0.00001 s',
    );
    expect(judgment.invalidReasons).toContain(
      '-r 0.001 s is more than a tenth of the measured p50 0.589 ms: use -r 0.000059 s or finer',
    );
  });

  it('joins the runner findings, the Job, the pods, the mTLS evidence, the datapath and the host', () => {
    const meshSpec: FortioRunSpec = { ...fixedRate, arm: 'mesh-mtls', clientNamespace: 'mesh' };
    const judgment = judgeNetworkRun(
      run('e1-mesh-mtls-r1', meshSpec),
      {
        ...evidence(fortioFixture('http-fixed-rate'), [pod('fortio-client-b', 'mesh', false)]),
        job: 'failed',
        datapath: undefined,
        host: { ...host, versions: {} },
        runnerReasons: ['precondition pods-restarted-after-label (mesh) not met'],
      },
      config,
    );
    expect(judgment.invalidReasons).toEqual([
      'precondition pods-restarted-after-label (mesh) not met',
      "the run's Job failed (status.failed > 0)",
      'mTLS unproven: no Istio metric evidence was recorded for the mesh-mtls arm',
      'pod mesh/fortio-client-b of the mesh-mtls arm has no istio-proxy native sidecar (was it created before the namespace label?)',
      'the iptables datapath was not verified on the host (no datapath evidence)',
      'no version recorded for k3s, fortio, netshoot, istio',
    ]);
    // The record carries the verdict: the report shows this run as "mTLS unproven".
    expect(judgment.mtlsProof).toBe('unproven');
  });

  it('fails a run without a result, and one whose result is of another kind', () => {
    const none = judgeNetworkRun(
      run('e1-plain-r1', fixedRate),
      { job: 'failed', pods: [], runnerReasons: ['precondition conntrack-baseline-below (500) not met'] },
      config,
    );
    expect(none).toEqual({
      valid: false,
      invalidReasons: [
        'precondition conntrack-baseline-below (500) not met',
        "the run's Job failed (status.failed > 0)",
        'the run left no result',
      ],
      flags: [],
    });
    const other = judgeNetworkRun(
      run('e1-plain-r1', fixedRate),
      { ...evidence(''), result: { kind: 'conntrack', conntrack: {} as ConntrackResult } },
      config,
    );
    expect(other.invalidReasons).toEqual(['the run is a fortio run but its result is a conntrack result']);
  });

  it('judges download and conntrack runs by their own checks', () => {
    const downloadSpec = {
      kind: 'download',
      arm: 'mesh-mtls',
      clientNamespace: 'mesh',
      url: 'http://fortio-server.mesh:8080/echo?size=104857600',
      bytes: 104_857_600,
    } as const;
    const download = judgeNetworkRun(
      { ...run('e6-mesh-mtls-r1', downloadSpec), experiment: 'E6' },
      {
        job: 'succeeded',
        result: {
          kind: 'download',
          download: {
            httpCode: '200',
            curlExit: 0,
            sizeDownloadBytes: 104_857_600,
            speedDownloadBytesPerSecond: 4.1e8,
            timeTotalSeconds: 0.26,
          },
        },
        pods: [pod('curl-e6', 'mesh', true), pod('fortio-server-0', 'mesh', true)],
        mtlsMetrics: { requestsBySecurityPolicy: { none: 1 }, tcpConnectionsOpened: 1 },
        host,
        datapath,
      },
      config,
    );
    expect(download.invalidReasons).toEqual([
      'istio_requests_total{connection_security_policy="none"} grew by 1 over the mesh-mtls run, which must carry none: its traffic was not mutual TLS as configured',
    ]);
    const conntrackSpec: ConntrackRunSpec = {
      kind: 'conntrack',
      limit: 1024,
      connections: 4000,
      connectTimeoutSeconds: 5,
      baselineMax: 500,
    };
    const conntrack = judgeNetworkRun(
      { ...run('e10-limit-1024', conntrackSpec), experiment: 'E10' },
      {
        job: 'succeeded',
        result: {
          kind: 'conntrack',
          conntrack: { limitBefore: 2048, limit: 1024, baseline: 180, limitAfterRestore: 2048, driver: null },
        },
        pods: [pod('conntrack-driver', 'probe', false)],
        host,
        datapath,
      },
      config,
    );
    expect(conntrack.invalidReasons).toEqual(['the conntrack driver left no result']);
  });

  it('flags an mTLS matrix deviation without invalidating the run', () => {
    const judgment = judgeNetworkRun(
      { ...run('e2-matrix', matrixSpec), experiment: 'E2' },
      {
        job: 'succeeded',
        result: { kind: 'mtls', cases: [{ ...strictCase, observed: { httpCode: '403', curlExit: 0 } }] },
        pods: [pod('curl-strict-out-of-mesh', 'plain', false)],
        host,
        datapath,
      },
      config,
    );
    expect(judgment).toEqual({
      valid: true,
      invalidReasons: [],
      flags: [
        'mTLS case strict-out-of-mesh: expected HTTP 000 with curl exit 56, observed HTTP 403 with curl exit 0',
      ],
    });
  });

  it("checks an E9 step against the cell's earlier steps and its new-connection run", () => {
    const earlier = {
      id: 'e9-services-100',
      valid: true,
      result: {
        kind: 'service-scale',
        scale: {
          servicesReady: 100,
          entries: 5200,
          entriesCommand: 'iptables-save -t nat | wc -l',
          prober: null,
        },
      },
    } as unknown as NetworkRunRecord;
    const judgment = judgeNetworkRun(
      { ...run('e9-services-1000', scaleSpec), experiment: 'E9' },
      {
        job: 'succeeded',
        result: {
          kind: 'service-scale',
          scale: {
            servicesReady: 1000,
            entries: 5100,
            entriesCommand: 'iptables-save -t nat | wc -l',
            prober: proberResult(20, 10_000, samples(spread.slice(0, 10))),
            newConnection: fortioFixture('http-fixed-rate'),
          },
        },
        pods: [pod('service-prober', 'probe', false)],
        host,
        datapath,
        earlier: [earlier],
      },
      config,
    );
    expect(judgment.invalidReasons).toEqual([
      'entries did not grow with the Services: 5100 at 1000 Services, 5200 at 100 (iptables-save -t nat | wc -l)',
      'new-connection run: fortio ran with DisableKeepAlive false, but the new-connection run needs keep-alive off (-keepalive=false)',
    ]);
  });
});

describe('judgeRepeats', () => {
  /** A record of repeat `repeat` of the plan's repeat group `e1-plain`-style: its id without `-rN`. */
  const record = (id: string, repeat: number, raw: string, valid = true): NetworkRunRecord => ({
    ...run(id, fixedRate, repeat),
    repeatGroup: id.replace(/-r\d+$/, ''),
    startedAt: '2026-11-30T10:00:00Z',
    finishedAt: '2026-11-30T10:00:26Z',
    job: 'succeeded',
    result: { kind: 'fortio', raw },
    pods: plainPods,
    valid,
    invalidReasons: valid ? [] : ['x'],
    flags: ['repeat spread: an old verdict'],
  });
  const withAvg = (avg: number) => {
    const json = JSON.parse(fortioFixture('http-fixed-rate'));
    json.DurationHistogram.Avg = avg;
    return JSON.stringify(json);
  };

  it("replaces earlier spread flags with the current verdict on the arm's valid repeats", () => {
    const records = [
      record('e1-plain-r1', 1, withAvg(0.000428)),
      record('e1-plain-r2', 2, withAvg(0.00043)),
      record('e1-plain-r3', 3, withAvg(0.000502)),
      record('e1-plain-r4', 4, withAvg(0.0009), false),
    ];
    const judged = judgeRepeats(records);
    expect(judged.map((r) => r.flags)).toEqual([
      [
        expect.stringMatching(
          /^repeat spread: e1-plain-r1 mean 0.428 ms is 5.6% below the 3 repeats' mean 0.453 ms of E1 plain fixed-rate/,
        ),
      ],
      [expect.stringMatching(/^repeat spread: e1-plain-r2 mean 0.430 ms is 5.1% below/)],
      [expect.stringMatching(/^repeat spread: e1-plain-r3 mean 0.502 ms is 10.7% above/)],
      [],
    ]);
    expect(judged.every((r, i) => r.valid === records[i].valid)).toBe(true);
  });

  it("does not compare E9's new-connection runs across Service counts: the plan marks no repeat", () => {
    // Same experiment, arm and mode (E9 plain new-connection), different steps: 0.43 ms against 0.9 ms.
    const step = (services: number, avg: number): NetworkRunRecord => ({
      ...record(`e9-new-connection-${services}`, 1, withAvg(avg)),
      experiment: 'E9',
      spec: { ...fixedRate, mode: 'new-connection' },
      repeat: undefined,
      repeatGroup: undefined,
      flags: [],
    });
    const judged = judgeRepeats([step(0, 0.00043), step(1000, 0.0009), step(5000, 0.0009)]);
    expect(judged.map((r) => r.flags)).toEqual([[], [], []]);
  });

  it('compares each repeat group on its own, even when groups share experiment, arm and mode', () => {
    // Two repeated runs of one arm at different loads (a variant of the plan): each group agrees
    // within itself, so nothing is flagged; judged together they would spread by about 35%.
    const light = (n: number, avg: number) => ({
      ...record(`e1-light-plain-r${n}`, n, withAvg(avg)),
      spec: { ...fixedRate, qps: 100 },
    });
    const heavy = (n: number, avg: number) => record(`e1-plain-r${n}`, n, withAvg(avg));
    const judged = judgeRepeats([light(1, 0.0003), heavy(1, 0.0006), light(2, 0.000301), heavy(2, 0.000602)]);
    expect(judged.map((r) => r.flags)).toEqual([[], [], [], []]);
    // A spread inside one group is still flagged, and names the group.
    const spread = judgeRepeats([light(1, 0.0003), heavy(1, 0.0006), light(2, 0.00036), heavy(2, 0.000602)]);
    expect(spread.map((r) => r.flags?.length)).toEqual([1, 0, 1, 0]);
    expect(spread[0].flags?.[0]).toMatch(
      /^repeat spread: e1-light-plain-r1 mean 0.300 ms is 9.1% below the 2 repeats' mean 0.330 ms of E1 plain fixed-rate \(repeats of e1-light-plain\)/,
    );
  });

  it('leaves no flag when the repeats agree', () => {
    const judged = judgeRepeats([
      record('e1-plain-r1', 1, withAvg(0.000428)),
      record('e1-plain-r2', 2, withAvg(0.00043)),
    ]);
    expect(judged.map((r) => r.flags)).toEqual([[], []]);
  });
});
