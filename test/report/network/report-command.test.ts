import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { NetworkStudyRecord } from '../../../lib/network/study/model.ts';
import { runLabHere } from '../../cli/run-lab.ts';
import { tempDir } from '../../temp.ts';
import { fixtureStudy } from '../fixture.ts';
import { fixtureCellStudy, fixtureNetworkStudies } from './fixture.ts';

/** A downloaded results prefix: one folder per cell, each with its study.json. */
async function cellsDir(studies: readonly NetworkStudyRecord[] = fixtureNetworkStudies()): Promise<string> {
  const dir = tempDir('lab-net-report-cli-');
  for (const study of studies) {
    await mkdir(join(dir, study.cell), { recursive: true });
    await writeFile(join(dir, study.cell, 'study.json'), JSON.stringify(study, null, 2));
  }
  return dir;
}

describe('lab report on a network study', () => {
  it('the folder of the cells: one report of every cell, beside them; the study files untouched', async () => {
    const dir = await cellsDir();
    const before = await readFile(join(dir, 'mesh', 'study.json'), 'utf8');
    const run = await runLabHere(['report', dir]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(
      [
        `lab report: read ${join(dir, 'dp-cilium', 'study.json')}`,
        `lab report: read ${join(dir, 'dp-iptables', 'study.json')}`,
        `lab report: read ${join(dir, 'mesh', 'study.json')}`,
        `wrote ${join(dir, 'report.md')}`,
        `wrote ${join(dir, 'report.html')}`,
        '',
      ].join('\n'),
    );
    const md = await readFile(join(dir, 'report.md'), 'utf8');
    expect(md).toMatch(/^# Network study report\n/);
    expect(md).toContain(
      '| mesh | Encryption (mTLS) | E3 mesh-mtls - E3 mesh-mtls-off | 0.140 ms | 0.132 to 0.148 ms | 22.6% |',
    );
    expect(md).toContain('| dp-cilium | e9-services-5000 | invalid |');
    const html = await readFile(join(dir, 'report.html'), 'utf8');
    expect(html.match(/<svg /g)).toHaveLength(4);
    expect(await readFile(join(dir, 'mesh', 'study.json'), 'utf8')).toBe(before);
  });

  it("one cell's folder: that cell's report in its folder", async () => {
    const dir = await cellsDir([fixtureCellStudy('dp-cilium')]);
    const run = await runLabHere(['report', join(dir, 'dp-cilium')]);
    expect(run.code, run.stderr).toBe(0);
    const md = await readFile(join(dir, 'dp-cilium', 'report.md'), 'utf8');
    expect(md).toContain('| dp-cilium (cilium) | 10,000 | 20,012 | 2 | 3 (estimate) | no baseline | no |');
    expect(md).toContain('No valid gRPC runs.');
  });

  it('several cell folders make one report, into --out; without --out it says so', async () => {
    const dir = await cellsDir();
    const cells = ['mesh', 'dp-iptables'].map((c) => join(dir, c));
    const refused = await runLabHere(['report', ...cells]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      'lab report: several results folders: choose where the report goes with --out\n',
    );
    const out = join(dir, 'reports');
    const run = await runLabHere(['report', ...cells, '--out', out]);
    expect(run.code, run.stderr).toBe(0);
    const md = await readFile(join(out, 'report.md'), 'utf8');
    expect(md).toContain('| mesh | iptables | sidecar |');
    expect(md).toContain('| dp-iptables | iptables | none |');
    expect(md).not.toContain('dp-cilium');
  });

  it('--baseline names the cell every cell is compared with; a cell the report lacks is refused with the cells it has', async () => {
    const dir = await cellsDir();
    const refused = await runLabHere(['report', dir, '--baseline', 'dp-nftables']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      'lab report: --baseline "dp-nftables" is not a cell of this report; choose one of: dp-cilium, dp-iptables, mesh\n',
    );
    expect(existsSync(join(dir, 'report.md'))).toBe(false);
    const run = await runLabHere(['report', dir, '--baseline', 'dp-cilium']);
    expect(run.code, run.stderr).toBe(0);
    const md = await readFile(join(dir, 'report.md'), 'utf8');
    expect(md).toContain('Baseline cell: dp-cilium (cilium, mesh none; named with --baseline).');
    expect(md).toContain('| Mean vs dp-cilium |');
  });

  it('a partial study: the report carries the banner and the command says it too', async () => {
    const mesh = fixtureCellStudy('mesh');
    const dir = await cellsDir([{ ...mesh, state: 'running', runs: mesh.runs.slice(0, 12) }]);
    const run = await runLabHere(['report', dir]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toBe(
      "lab report: Partial study: cell mesh's study is still running (12 run record(s) so far). The tables cover only the recorded runs; lab run resumes a study, skipping every run that already has a valid record.\n",
    );
    expect(await readFile(join(dir, 'report.md'), 'utf8')).toContain("> **Partial study: cell mesh's study");
  });

  // In-process: the report command's spawned run (bin/launch.mjs, exit code and terminal output)
  // is test/report/report-command.test.ts's; the error path here is the same runLab code.
  it('a network study that is not shaped right is named with its problems, without a stack trace', async () => {
    const mesh = fixtureCellStudy('mesh');
    const dir = await cellsDir([{ ...mesh, state: 'done' } as unknown as NetworkStudyRecord]);
    const run = await runLabHere(['report', dir]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `lab report: ${join(dir, 'mesh', 'study.json')} is not a network study JSON (lab: "network"): 1 problem(s)\n  - state: `,
    );
    expect(run.stderr).not.toMatch(/\n\s+at /);
    expect(existsSync(join(dir, 'report.md'))).toBe(false);
  });

  it('a folder without a network study beside network cells is refused; the first lab keeps its one folder', async () => {
    const dir = await cellsDir([fixtureCellStudy('mesh')]);
    const gateway = join(dir, 'gateway');
    await mkdir(gateway);
    await writeFile(join(gateway, 'study.json'), JSON.stringify(fixtureStudy()));
    const mixed = await runLabHere(['report', join(dir, 'mesh'), gateway, '--out', join(dir, 'out')]);
    expect(mixed.code).toBe(1);
    expect(mixed.stderr).toBe(
      `lab report: ${gateway}: no network study (a study.json with lab: "network") in the folder or its cell folders\n`,
    );
    const two = await runLabHere(['report', gateway, gateway]);
    expect(two.code).toBe(1);
    expect(two.stderr).toBe(
      'lab report: several results folders make one report only for network-lab cells; give one LLM-gateway results folder\n',
    );
    // --no-calibrate: the calibration (seconds of simulation) is report-command.test.ts's to check.
    const first = await runLabHere(['report', '--no-calibrate', gateway]);
    expect(first.code, first.stderr).toBe(0);
    expect(await readFile(join(gateway, 'report.md'), 'utf8')).toMatch(/^# LLM-gateway study report\n/);
  });
});
