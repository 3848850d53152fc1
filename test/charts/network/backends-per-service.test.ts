import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { synthesizeCluster } from '../../../charts/synthesize.ts';
import { inspectManifests, type KubeObject, loadManifestFolder } from '../../../lib/check/index.ts';
import { parseLabConfig } from '../../../lib/config/load.ts';
import { lbEntriesPerService } from '../../../lib/config/network-rules.ts';
import { planNetworkStudy } from '../../../lib/network/study/planner.ts';
import { tempDir } from '../../temp.ts';

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary manifest fields
type Any = any;

/** One Cilium cell with E9's backend of `backends` replicas. */
async function cellWith(backends: number) {
  const config = parseLabConfig({
    lab: 'network',
    network: {
      cells: [{ name: 'dp-cilium', datapath: 'cilium' }],
      experiments: { serviceScale: { backendsPerService: backends } },
    },
  });
  const out = tempDir('network-backends-');
  synthesizeCluster(config, out);
  const { objects } = await loadManifestFolder(join(out, 'dp-cilium'));
  return { config, objects: objects as Any[] };
}

describe('experiments.serviceScale.backendsPerService reaches the cell', () => {
  for (const backends of [1, 2]) {
    it(`with ${backends}: the backend's replicas, the cell's description and lab check agree`, async () => {
      const { config, objects } = await cellWith(backends);
      const backend = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'scale-backend');
      expect(backend.spec.replicas).toBe(backends);
      const cell = JSON.parse(
        Object.values(
          objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'network-cell').data,
        )[0] as string,
      );
      expect(cell.backendsPerService).toBe(backends);
      expect(inspectManifests(objects as KubeObject[]).violations).toEqual([]);
      // lab check catches a backend that does not match the plan.
      backend.spec.replicas = backends + 1;
      const violations = inspectManifests(objects as KubeObject[]).violations;
      expect(violations.map((v) => v.message)).toEqual([
        `is ${backends + 1}, but cell dp-cilium was planned with ${backends} backends per Service (experiments.serviceScale.backendsPerService): E9's entries per Service and its readiness wait would not match`,
      ]);
      // lab plan counts with the same number.
      expect(planNetworkStudy(config).cells[0].entries.perService).toBe(lbEntriesPerService(backends));
    });
  }
});
