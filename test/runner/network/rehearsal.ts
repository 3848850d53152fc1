import { join } from 'node:path';
import { loadLabConfig } from '../../../lib/config/load.ts';
import type { LabConfig } from '../../../lib/config/schema.ts';
import type { NetworkStudyRecord } from '../../../lib/network/study/model.ts';
import { networkStudyPlan } from '../../../lib/network/study/plan.ts';
import { studyDir } from '../../../lib/runner/layout.ts';
import { FileNetworkResultStore } from '../../../lib/runner/network/file-store.ts';
import { runNetworkStudy } from '../../../lib/runner/network/run-network-study.ts';
import { tempDir } from '../../temp.ts';
import { FAST, FakeCell, fakeDeps } from './fake-cell.ts';

/** The rehearsal's broken runs: exactly these are invalid, for exactly these reasons. */
export const REHEARSAL_BROKEN = {
  /** A fortio run whose histogram has fortio's default 1 ms resolution (bucket-position percentiles). */
  coarseResolution: { cell: 'mesh', runId: 'e1-plain-r3', job: /^net-e1-plain-r3$/ },
  /** An E9 step whose prober attempts come every 200 ms, not every 20 ms: its samples are quantized to 200 ms. */
  coarseProber: { cell: 'dp-iptables', runId: 'e9-services-1000', job: /^net-e9-services-1000-prober$/ },
} as const;

export interface RehearsedCell {
  readonly cell: string;
  /** The cell's results folder (status.json, studies/<id>/...). */
  readonly resultsDir: string;
  /** The study's folder (study.json, runs/, outputs/, runner.log). */
  readonly studyDir: string;
  readonly study: NetworkStudyRecord;
  readonly fake: FakeCell;
  readonly lines: readonly string[];
}

/**
 * The whole default network study (examples/network-lab.yaml) of every cell, each against its own
 * fake cell and results folder, with the two broken runs of REHEARSAL_BROKEN. rehearsal.test.ts
 * runs it once and reads these study folders for both the runner's checks and the report's.
 */
export async function rehearseNetworkStudy(
  config: LabConfig = loadLabConfig({ file: 'examples/network-lab.yaml' }).config,
): Promise<RehearsedCell[]> {
  const cells: RehearsedCell[] = [];
  for (const cell of config.network.cells) {
    const root = tempDir(`network-rehearsal-${cell.name}-`);
    const fake = new FakeCell(config, cell.name, root);
    const broken = Object.values(REHEARSAL_BROKEN);
    fake.coarseFortio = broken.find((b) => b.cell === cell.name && b.runId.startsWith('e1'))?.job;
    fake.coarseProber = broken.find((b) => b.cell === cell.name && b.runId.startsWith('e9'))?.job;
    const lines: string[] = [];
    const study = await runNetworkStudy(
      fakeDeps(fake, new FileNetworkResultStore(root), lines),
      config,
      networkStudyPlan(config, cell.name),
      FAST,
    );
    cells.push({
      cell: cell.name,
      resultsDir: root,
      studyDir: join(root, studyDir(study.studyId)),
      study,
      fake,
      lines,
    });
  }
  return cells;
}
