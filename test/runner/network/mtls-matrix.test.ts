import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadLabConfig } from '../../../lib/config/load.ts';
import type { MtlsCaseResult, NetworkRunRecord, NetworkStudyPlan } from '../../../lib/network/study/model.ts';
import { networkStudyPlan } from '../../../lib/network/study/plan.ts';
import { studyDir } from '../../../lib/runner/layout.ts';
import { FileNetworkResultStore } from '../../../lib/runner/network/file-store.ts';
import { runJobs } from '../../../lib/runner/network/jobs.ts';
import { JOB_OUTPUT_MOUNT } from '../../../lib/runner/network/layout.ts';
import { runNetworkStudy } from '../../../lib/runner/network/run-network-study.ts';
import { tempDir } from '../../temp.ts';
import { FAST, FakeCell, fakeDeps } from './fake-cell.ts';
import { containerOf, mtlsCasesOf } from './fake-cell-physics.ts';

/**
 * The mTLS matrix (E2) and E8 with one client pod per source: each case's curl still writes its
 * own outcome, judged on its own, and one case that breaks does not hide the others.
 */

const config = loadLabConfig({ file: 'examples/network-lab.yaml' }).config;

function planOf(ids: readonly string[]): NetworkStudyPlan {
  const full = networkStudyPlan(config, 'mesh');
  return { ...full, runs: full.runs.filter((r) => ids.includes(r.id)) };
}

function setup() {
  const root = tempDir('network-mtls-');
  const fake = new FakeCell(config, 'mesh', root);
  return { root, fake, deps: fakeDeps(fake, new FileNetworkResultStore(root)) };
}

const casesOf = (run: NetworkRunRecord): readonly MtlsCaseResult[] => {
  if (run.result?.kind !== 'mtls') throw new Error('not an mTLS result');
  return run.result.cases;
};

const E2_JOBS = [
  'net-e2-matrix-plain-default-out-of-mesh',
  'net-e2-matrix-mesh-good-in-mesh',
  'net-e2-matrix-mesh-bad-in-mesh',
  'net-e2-matrix-mesh-default-in-mesh',
];

describe('the mTLS matrix, one client pod per source', () => {
  it('records every case, observed beside expected, each from its source pod under its service account', async () => {
    const t = setup();
    const study = await runNetworkStudy(t.deps, config, planOf(['e2-matrix', 'e8-strict-exceptions']), FAST);
    for (const run of study.runs) {
      expect(run.valid, run.invalidReasons.join('; ')).toBe(true);
      for (const c of casesOf(run)) expect(c.observed, c.id).toEqual(c.expected);
    }
    // Seven cases, four sources: four pods for E2; E8's two out-of-mesh curls share one.
    const created = t.fake.created.map((j) => j.metadata.name);
    expect(created.filter((n) => n.startsWith('net-e2-'))).toEqual(E2_JOBS);
    expect(created.filter((n) => n.startsWith('net-e8-'))).toEqual([
      'net-e8-strict-exceptions-plain-default-out-of-mesh',
    ]);
    const [e2] = study.runs;
    // The plan's case order, each case naming the pod that observed it.
    expect(casesOf(e2).map((c) => [c.id, c.job])).toEqual([
      ['no-policy-out-of-mesh', E2_JOBS[0]],
      ['port-exception-out-of-mesh', E2_JOBS[0]],
      ['strict-out-of-mesh', E2_JOBS[0]],
      ['strict-in-mesh', E2_JOBS[1]],
      ['authz-allowed', E2_JOBS[1]],
      ['authz-denied', E2_JOBS[2]],
      ['authz-default', E2_JOBS[3]],
    ]);
    const observed = (id: string) => casesOf(e2).find((c) => c.id === id)?.observed;
    // STRICT drops the plaintext connection; the two PERMISSIVE rows answer; authz denies with 403.
    expect(observed('strict-out-of-mesh')).toEqual({ httpCode: '000', curlExit: 56 });
    expect(observed('no-policy-out-of-mesh')).toEqual({ httpCode: '200', curlExit: 0 });
    expect(observed('port-exception-out-of-mesh')).toEqual({ httpCode: '200', curlExit: 0 });
    expect(observed('authz-denied')).toEqual({ httpCode: '403', curlExit: 0 });
    // Each source's identity: service account, injection opt-in or opt-out, and the URLs of its cases.
    const job = (name: string) => {
      const found = t.fake.created.find((j) => j.metadata.name === name);
      if (!found) throw new Error(`no job/${name}`);
      return found;
    };
    const pod = (name: string) =>
      (job(name).spec as { template: Record<string, Record<string, unknown>> }).template;
    expect(pod(E2_JOBS[2]).spec.serviceAccountName).toBe('bad');
    expect(pod(E2_JOBS[3]).spec.serviceAccountName).toBeUndefined();
    expect(pod(E2_JOBS[0]).metadata.labels).toMatchObject({ 'sidecar.istio.io/inject': 'false' });
    expect(pod(E2_JOBS[1]).metadata.labels).toMatchObject({ 'sidecar.istio.io/inject': 'true' });
    expect(mtlsCasesOf(containerOf(job(E2_JOBS[0])).command)).toEqual([
      { id: 'no-policy-out-of-mesh', url: 'http://fortio.mesh-default.svc.cluster.local:8080/echo' },
      { id: 'port-exception-out-of-mesh', url: 'http://fortio-permissive.mesh.svc.cluster.local:8080/echo' },
      { id: 'strict-out-of-mesh', url: 'http://fortio.mesh.svc.cluster.local:8080/echo' },
    ]);
    // The in-mesh pods ran with the sidecar, the out-of-mesh one without.
    expect(e2.pods.map((p) => [p.pod.replace(/-\d+$/, ''), p.hasSidecar])).toEqual(
      E2_JOBS.map((name, i) => [name, i > 0]),
    );
    // Every case's own write-out is kept in the run's attempt folder.
    const attempt = join(t.root, studyDir(study.studyId), 'attempts', 'e2-matrix', '1');
    const kept = readdirSync(attempt).filter((f) => f.endsWith('.json'));
    expect(kept.sort()).toEqual(
      casesOf(e2)
        .map((c) => `${c.job}-curl-${c.id}.json`)
        .sort(),
    );
  });

  it('judges each case on its own: a missing outcome and a deviation hide none of the others', async () => {
    const t = setup();
    // In the good pod, strict-in-mesh's curl leaves nothing; authz-allowed shares that pod.
    t.fake.brokenCurlCases.set('strict-in-mesh', 'no-file');
    // The AuthorizationPolicy lets `bad` in: a finding about the cluster, not a broken run.
    t.fake.brokenCurlCases.set(
      'authz-denied',
      '{"httpCode":"200","curlExit":0,"sizeDownloadBytes":512,"speedDownloadBytesPerSecond":1,"timeTotalSeconds":0.004}',
    );
    const study = await runNetworkStudy(t.deps, config, planOf(['e2-matrix']), FAST);
    const [e2] = study.runs;
    const byId = new Map(casesOf(e2).map((c) => [c.id, c]));
    expect(byId.get('strict-in-mesh')?.observed).toBeNull();
    expect(byId.get('authz-denied')?.observed).toEqual({ httpCode: '200', curlExit: 0 });
    for (const id of [
      'no-policy-out-of-mesh',
      'port-exception-out-of-mesh',
      'strict-out-of-mesh',
      'authz-allowed',
      'authz-default',
    ])
      expect(byId.get(id)?.observed, id).toEqual(byId.get(id)?.expected);
    // Invalid for the one case without an outcome only, naming it and its pod.
    expect(e2.valid).toBe(false);
    expect(e2.invalidReasons).toEqual([
      `case strict-in-mesh: job/${E2_JOBS[1]} succeeded and left no curl-strict-in-mesh.json`,
      'mTLS case strict-in-mesh was not observed (its curl left no outcome)',
    ]);
    expect(e2.flags).toEqual([
      'mTLS case authz-denied: expected HTTP 403 with curl exit 0, observed HTTP 200 with curl exit 0',
    ]);
  });

  it("the grouped Job's shell runs every case's curl, a failing curl included, one file each", () => {
    const box = tempDir('lab-mtls-curls-');
    mkdirSync(join(box, 'bin'));
    mkdirSync(join(box, 'out'));
    // curl: the last argument is the URL; a `drop` host fails as STRICT does (HTTP 000, exit 56),
    // printing its write-out first as curl does; a `hang` host exits 28 after --max-time.
    const curl = join(box, 'bin', 'curl');
    writeFileSync(
      curl,
      `#!/bin/sh
for a; do url=$a; done
echo "$*" >> "${box}/calls.log"
case "$url" in
*drop*) printf '{"httpCode":"000","curlExit":56}'; exit 56;;
*hang*) printf '{"httpCode":"000","curlExit":28}'; exit 28;;
esac
printf '{"httpCode":"200","curlExit":0}'
`,
    );
    chmodSync(curl, 0o755);
    const t = setup();
    const e2 = planOf(['e2-matrix']).runs[0];
    const job = Object.values(runJobs(t.deps.jobs, e2))[0];
    const command = containerOf(job).command.map((arg) =>
      arg.replaceAll(`"${JOB_OUTPUT_MOUNT}/`, `"${box}/out/`),
    );
    const [sh, flag, script, name] = command;
    expect([sh, flag, name]).toEqual(['sh', '-c', 'mtls-curls']);
    const result = spawnSync(
      'dash',
      [
        flag,
        script,
        name,
        'first',
        'http://ok/',
        'second',
        'http://drop/',
        'third',
        'http://hang/',
        'fourth',
        'http://ok/',
      ],
      { env: { PATH: `${box}/bin:/usr/bin:/bin` }, encoding: 'utf8' },
    );
    expect(result.status, result.stderr).toBe(0);
    const out = (id: string) => JSON.parse(readFileSync(join(box, 'out', `curl-${id}.json`), 'utf8'));
    expect(out('first')).toEqual({ httpCode: '200', curlExit: 0 });
    expect(out('second')).toEqual({ httpCode: '000', curlExit: 56 });
    expect(out('third')).toEqual({ httpCode: '000', curlExit: 28 });
    expect(out('fourth')).toEqual({ httpCode: '200', curlExit: 0 });
    expect(readdirSync(join(box, 'out')).sort()).toEqual([
      'curl-first.json',
      'curl-fourth.json',
      'curl-second.json',
      'curl-third.json',
    ]);
    // Each curl bounded, never --fail (a 403 is an answer, exit 0).
    const calls = readFileSync(join(box, 'calls.log'), 'utf8').trim().split('\n');
    expect(calls).toHaveLength(4);
    for (const call of calls) {
      expect(call).toContain('--max-time 10');
      expect(call).not.toMatch(/--fail|-f /);
    }
  });
});
