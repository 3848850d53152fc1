import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { synthesizeCluster } from '../../charts/synthesize.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { tempDir } from '../temp.ts';

function synthesize(overrides: object = {}): string {
  const outdir = tempDir('lab-cluster-');
  synthesizeCluster(parseLabConfig(overrides), outdir);
  return outdir;
}

describe('synthesizeCluster', () => {
  it('writes the charts in apply order with the study runner last, jobs and prerequisites beside them', () => {
    const out = synthesize();
    const charts = readdirSync(out).filter((name) => /^\d+-.*\.yaml$/.test(name));
    expect(charts).toEqual([...charts].sort());
    expect(charts.at(-1)).toBe('90-runner.yaml');
    expect(existsSync(join(out, 'jobs', 'partition.yaml'))).toBe(true);
    expect(JSON.parse(readFileSync(join(out, 'prerequisites.json'), 'utf8'))).toHaveProperty('prerequisites');
    const runner = parseAllDocuments(readFileSync(join(out, '90-runner.yaml'), 'utf8')).map((d) => d.toJS());
    expect(runner.map((o) => o.kind)).toContain('Job');
  });

  it('keeps the runner out of the apply order when the study starts on demand', () => {
    const out = synthesize({ runner: { autoStart: false } });
    expect(existsSync(join(out, '90-runner.yaml'))).toBe(false);
    expect(readdirSync(join(out, 'runner'))).toEqual(['90-runner.yaml']);
  });

  it('runs the runner on the configured image', () => {
    const out = synthesize({ runner: { image: 'node:22.21.0-bookworm-slim' } });
    expect(readFileSync(join(out, '90-runner.yaml'), 'utf8')).toContain('image: node:22.21.0-bookworm-slim');
  });
});
