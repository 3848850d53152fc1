import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import { RUNNER_ON_DEMAND_DIR, STUDY_RUNNER_CHART } from '../../lib/study/topology.ts';
import { filesUnder, layoutProblems } from '../docs/file-layout.ts';
import { tempDir } from '../temp.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** `npm run synth:k8s -- --output <dist>`, without npm around it. */
function synthK8s(dist: string, config: string) {
  return spawnSync(process.execPath, ['bin/synth-k8s.mjs', '--output', dist], {
    cwd: root,
    env: { ...process.env, LAB_CONFIG: config },
    encoding: 'utf8',
  });
}

/** A dist/ folder from an earlier synthesis, and a configuration file. */
function setUp(configText: string) {
  const dir = tempDir('lab-synth-k8s-');
  const dist = join(dir, 'dist');
  mkdirSync(dist);
  writeFileSync(join(dist, '00-namespace.yaml'), 'kind: Namespace # from an earlier synth\n');
  const config = join(dir, 'lab.yaml');
  writeFileSync(config, configText);
  return { dir, dist, config };
}

/**
 * One synthesis of `namespace: other-lab` over an earlier dist/, read by three tests: a run of the
 * cdk8s app costs about 4 s of CPU (tsx, cdk8s, the lab's charts). The results claim and the AI
 * Gateway arm make it write every optional chart, for docs/cluster.md's tree of dist/.
 */
let otherLab: (ReturnType<typeof setUp> & { result: ReturnType<typeof synthK8s> }) | undefined;
function otherLabSynth() {
  if (!otherLab) {
    const paths = setUp(
      'namespace: other-lab\nrunner:\n  results:\n    volume: claim\nstudy:\n  optionalArms: [ai-gateway]\n',
    );
    otherLab = { ...paths, result: synthK8s(paths.dist, paths.config) };
  }
  return otherLab;
}

describe('npm run synth:k8s', () => {
  test('is the all-or-nothing wrapper, not cdk8s synth (which deletes dist/ first)', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    expect(pkg.scripts['synth:k8s']).toBe('node bin/synth-k8s.mjs');
  });

  test('a bad configuration leaves dist/ as it was and prints only the errors', () => {
    const { dir, dist, config } = setUp('vllm:\n  replicas: 0\n');
    const result = synthK8s(dist, config);
    expect(result.status).toBe(1);
    expect(readFileSync(join(dist, '00-namespace.yaml'), 'utf8')).toBe(
      'kind: Namespace # from an earlier synth\n',
    );
    expect(readdirSync(dist)).toEqual(['00-namespace.yaml']);
    // Nothing staged is left behind.
    expect(readdirSync(dir).sort()).toEqual(['dist', 'lab.yaml']);
    expect(result.stderr).toMatch(/^Invalid lab configuration \(.*lab\.yaml\): \d+ problem\(s\)\n/);
    expect(result.stderr).toContain('  - vllm.replicas = 0: must be greater than 0\n');
    // Every line is the header or a problem: no stack trace, no cdk8s-cli error.
    for (const line of result.stderr.trimEnd().split('\n')) {
      expect(line).toMatch(/^(Invalid lab configuration| {2}- )/);
    }
    expect(result.stderr).not.toMatch(/^\s+at /m);
    expect(result.stdout).toBe('');
  });

  test('a good configuration replaces dist/ with the new manifests', () => {
    const { dir, dist, result } = otherLabSynth();
    expect(result.status, result.stderr).toBe(0);
    expect(readFileSync(join(dist, '00-namespace.yaml'), 'utf8')).toMatch(/name: other-lab/);
    expect(existsSync(join(dist, 'prerequisites.json'))).toBe(true);
    expect(existsSync(join(dist, 'jobs'))).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(['dist', 'lab.yaml']);
    expect(result.stdout).toMatch(/^ {2}- \S*dist\/00-namespace\.yaml$/m);
  });

  test("writes the files of docs/cluster.md's tree of dist/, and no other", () => {
    const { dist, result } = otherLabSynth();
    expect(result.status, result.stderr).toBe(0);
    // With runner.autoStart: false the runner goes to runner/ instead (charts/synthesize.ts).
    const onDemandRunner = `${RUNNER_ON_DEMAND_DIR}/${STUDY_RUNNER_CHART}.yaml`;
    expect(layoutProblems('docs/cluster.md', 'dist', filesUnder(dist), [onDemandRunner])).toEqual([]);
  });

  // From entry-points.test.ts: the app this runs (cdk8s.yaml's app, bin/cdk8s-app.ts) reads $LAB_CONFIG.
  test('the cdk8s app honours $LAB_CONFIG', () => {
    const { dist, result } = otherLabSynth();
    expect(result.status, result.stderr).toBe(0);
    const manifests = readdirSync(dist, { recursive: true, encoding: 'utf8' }).filter((name) =>
      name.endsWith('.yaml'),
    );
    const text = manifests.map((name) => readFileSync(join(dist, name), 'utf8')).join('\n');
    expect(text).toMatch(/kind: Namespace\n(.*\n)*? {2}name: other-lab/);
    expect(text).not.toContain('namespace: vllm');
  });
});
