import { describe, expect, it } from 'vitest';
import { synthesizeCluster } from '../../charts/synthesize.ts';
import { inspectManifests, loadManifestFolder } from '../../lib/check/index.ts';
import { loadLabConfig } from '../../lib/config/load.ts';
import { tempDir } from '../temp.ts';

describe('lab check on a synthesized network lab (one folder per cell)', () => {
  it('checks each cell folder against its own cell: the example lab has no violation', async () => {
    const config = loadLabConfig({ file: 'examples/network-lab.yaml' }).config;
    const out = tempDir('network-dist-');
    synthesizeCluster(config, out);
    const { objects } = await loadManifestFolder(out);
    const report = inspectManifests(objects);
    expect(report.violations.map((v) => `${v.object} ${v.field}: ${v.message}`)).toEqual([]);
    expect(report.notes.filter((n) => /no readable network-cell/.test(n.message))).toEqual([]);
  });
});
