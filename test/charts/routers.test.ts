import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { routerStartScript } from '../../charts/routers.ts';
import { ROUTER_HEALTH_CHECK_INTERVAL_SECS } from '../../lib/config/router-defaults.ts';
import { container, find, synthLab } from './synth.ts';

const WORKERS = [
  'http://qwen3-0.qwen3-headless.vllm.svc.cluster.local:8000',
  'http://qwen3-1.qwen3-headless.vllm.svc.cluster.local:8000',
];

/** The vllm-router argv the container's `sh -c` script execs. */
function routerArgv(script: string): string[] {
  const exec = script.split(' && ').find((part) => part.startsWith('exec vllm-router '));
  if (!exec) throw new Error(`no exec vllm-router in: ${script}`);
  return exec.slice('exec vllm-router '.length).split(' ');
}

describe('vllm-router arms', () => {
  const { charts, objects } = synthLab();

  test('one Deployment and one Service per variant', () => {
    const names = (kind: string) =>
      charts['40-routers'].filter((o) => o.kind === kind).map((o) => o.metadata.name);
    const expected = ['vllm-router-round-robin', 'vllm-router-cache-aware', 'vllm-router-cache-aware-tuned'];
    expect(names('Deployment')).toEqual(expected);
    expect(names('Service')).toEqual(expected);
  });

  test('installs the pinned router offline from the host wheelhouse into the base image pinned by digest', () => {
    const deployment = find(objects, 'Deployment', 'vllm-router-round-robin');
    const c = container(deployment);
    expect(c.image).toBe(
      'python:3.12-slim@sha256:229a2c5bfa27522db7815ea81f9bed70af17ccb9de9fc7ad142b1877b5830d36',
    );
    expect(c.command[0]).toBe('sh');
    expect(c.command[2]).toMatch(
      /^if ls \/wheels\/vllm_router-0\.1\.15-\*\.whl >\/dev\/null 2>&1; then pip install --no-cache-dir --no-index --find-links \/wheels vllm-router==0\.1\.15; else echo "no vllm-router 0\.1\.15 wheel in \/var\/lib\/lab\/models\/wheels\/vllm-router-0\.1\.15: installing from PyPI" >&2; pip install --no-cache-dir vllm-router==0\.1\.15; fi && exec vllm-router /,
    );
    expect(c.volumeMounts).toEqual([{ name: 'wheelhouse', mountPath: '/wheels', readOnly: true }]);
    expect(deployment.spec.template.spec.volumes).toEqual([
      {
        name: 'wheelhouse',
        hostPath: { path: '/var/lib/lab/models/wheels/vllm-router-0.1.15', type: 'DirectoryOrCreate' },
      },
    ]);
  });

  test('the start script installs offline when the wheel is there, and says so when it falls back to PyPI', () => {
    const dir = mkdtempSync(join(tmpdir(), 'router-start-'));
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    // Fake pip and vllm-router that log their argv.
    for (const name of ['pip', 'vllm-router']) {
      writeFileSync(join(bin, name), `#!/bin/sh\necho "${name} $*" >> "${dir}/calls"\n`);
      chmodSync(join(bin, name), 0o755);
    }
    const wheels = join(dir, 'wheels');
    mkdirSync(wheels);
    const script = routerStartScript('0.1.15', ['--policy', 'round_robin']).replaceAll(
      ' /wheels',
      ` ${wheels}`,
    );
    const run = () =>
      spawnSync('sh', ['-c', script], { env: { PATH: `${bin}:/usr/bin:/bin` }, encoding: 'utf8' });
    const empty = run();
    expect(empty.status).toBe(0);
    expect(empty.stderr).toContain(
      'no vllm-router 0.1.15 wheel in /var/lib/lab/models/wheels/vllm-router-0.1.15: installing from PyPI',
    );
    writeFileSync(join(wheels, 'vllm_router-0.1.15-cp38-abi3-manylinux_2_28_x86_64.whl'), '');
    const staged = run();
    expect(staged.stderr).toBe('');
    expect(readFileSync(join(dir, 'calls'), 'utf8').trim().split('\n')).toEqual([
      'pip install --no-cache-dir vllm-router==0.1.15',
      'vllm-router --policy round_robin',
      `pip install --no-cache-dir --no-index --find-links ${wheels} vllm-router==0.1.15`,
      'vllm-router --policy round_robin',
    ]);
  });

  test('overrides host, port and metrics host, sets the health-check interval the planner assumes, and lists the replicas by stable name', () => {
    const c = container(find(objects, 'Deployment', 'vllm-router-round-robin'));
    expect(routerArgv(c.command[2])).toEqual([
      '--host',
      '0.0.0.0',
      '--port',
      '8000',
      '--policy',
      'round_robin',
      '--worker-urls',
      ...WORKERS,
      '--prometheus-host',
      '0.0.0.0',
      '--health-check-interval-secs',
      String(ROUTER_HEALTH_CHECK_INTERVAL_SECS),
    ]);
    // The planner's load-counter resets follow this interval (lib/study/arm-predictions.ts), so it
    // is set rather than left to a default read only around 0.1.15 (docs/facts.md §3.3).
    expect(ROUTER_HEALTH_CHECK_INTERVAL_SECS).toBe(60);
    expect(c.command[2]).not.toContain('nodeport');
  });

  test('cache_aware variants carry their thresholds', () => {
    const defaults = routerArgv(container(find(objects, 'Deployment', 'vllm-router-cache-aware')).command[2]);
    expect(defaults.slice(defaults.indexOf('--health-check-interval-secs') + 2)).toEqual([
      '--cache-threshold',
      '0.3',
      '--balance-abs-threshold',
      '64',
      '--balance-rel-threshold',
      '1.5',
      '--eviction-interval-secs',
      '120',
      '--max-tree-size',
      '67108864',
    ]);
    const tuned = routerArgv(
      container(find(objects, 'Deployment', 'vllm-router-cache-aware-tuned')).command[2],
    );
    expect(tuned).toContain('cache_aware');
    const flag = (name: string) => tuned[tuned.indexOf(name) + 1];
    expect(flag('--balance-abs-threshold')).toBe('4096');
    expect(flag('--balance-rel-threshold')).toBe('100');
    expect(flag('--eviction-interval-secs')).toBe('3600');
  });

  test('probes on /readiness and /liveness; Service on 8000', () => {
    const c = container(find(objects, 'Deployment', 'vllm-router-cache-aware'));
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readiness', port: 8000 });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/liveness', port: 8000 });
    const svc = find(objects, 'Service', 'vllm-router-cache-aware');
    expect(svc.spec.selector).toEqual({ app: 'vllm-router-cache-aware' });
    expect(svc.spec.ports[0]).toEqual({ name: 'http', port: 8000, targetPort: 8000 });
  });
});
