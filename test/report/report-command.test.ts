import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runLabCli, runLabHere } from '../cli/run-lab.ts';
import { tempDir } from '../temp.ts';
import { fixtureStudy } from './fixture.ts';

async function resultsDir(study: unknown = fixtureStudy()): Promise<string> {
  const dir = tempDir('lab-report-cli-');
  await writeFile(
    join(dir, 'study.json'),
    typeof study === 'string' ? study : JSON.stringify(study, null, 2),
  );
  return dir;
}

describe('lab report', () => {
  it('writes report.md and report.html beside study.json, prints their paths and leaves study.json as it was', async () => {
    const dir = await resultsDir();
    const before = await readFile(join(dir, 'study.json'), 'utf8');
    const run = await runLabHere(['report', dir]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`wrote ${join(dir, 'report.md')}`);
    expect(run.stdout).toContain(`wrote ${join(dir, 'report.html')}`);
    const md = await readFile(join(dir, 'report.md'), 'utf8');
    expect(md).toContain(
      '| Hit rate | Envoy + GAIE Endpoint Picker over /v1/completions | 73.7% | 78.0% | +4.3 points | better |',
    );
    // The replayed study calibrates itself on its bound runs: a-priori, calibrated and measured side by side.
    expect(md).toContain('## Prediction vs measurement, calibrated on this study');
    expect(md).toContain(
      '| Arm | Figure | A-priori prediction | Calibrated prediction | Measured | Band | Result |',
    );
    expect(md).toMatch(
      /^\| Kubernetes Service \(kube-proxy\) \| total tok\/s \| [\d,]+ \+-\d+ \| [\d,]+ \+-\d+ \| 19,658 \| \+-[\d,]+ \| (inside|outside: .+) \|$/m,
    );
    expect(md).toMatch(
      /Fitted on 4 single-replica run\(s\) \(bound-p128, bound-p64, bound-p16, bound-p8\): stepOverheadMs /,
    );
    // The partition has no front end: where it leaves its band the model does, and arms that leave it
    // the same way are not blamed on their front end.
    expect(md).toMatch(
      /^\| Ideal partition \(reference\) \| mean TTFT \| .* \| outside: slower than its model with no front end: /m,
    );
    expect(md).toMatch(
      /^\| Kubernetes Service \(kube-proxy\) \| mean TTFT \| .* \| outside: slower than its model, as the ideal partition is: /m,
    );
    const html = await readFile(join(dir, 'report.html'), 'utf8');
    expect(html.match(/<svg /g)).toHaveLength(3);
    expect(html).toContain('calibrated on this study');
    expect(await readFile(join(dir, 'study.json'), 'utf8')).toBe(before);
  });

  it('--no-calibrate leaves the calibrated section out', async () => {
    const dir = await resultsDir();
    const run = await runLabHere(['report', '--no-calibrate', dir]);
    expect(run.code).toBe(0);
    expect(await readFile(join(dir, 'report.md'), 'utf8')).not.toContain('calibrated on this study');
  });

  it('writes into --out, creating it, and nothing into the results folder', async () => {
    const dir = await resultsDir();
    const out = join(dir, 'reports', 'today');
    const run = await runLabHere(['report', '--no-calibrate', dir, '--out', out]);
    expect(run.code).toBe(0);
    expect(existsSync(join(out, 'report.md'))).toBe(true);
    expect(existsSync(join(out, 'report.html'))).toBe(true);
    expect(existsSync(join(dir, 'report.md'))).toBe(false);
  });

  it('an --out that cannot be created is named with the reason, without a stack trace', async () => {
    const dir = await resultsDir();
    const out = join(dir, 'study.json', 'reports');
    const run = await runLabHere(['report', '--no-calibrate', dir, '--out', out]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      `lab report: cannot write ${out}: a part of the path is a file, not a folder (ENOTDIR); choose another folder with --out\n`,
    );
  });

  it('a partial study: the reports carry the banner and the command says it too', async () => {
    const study = fixtureStudy();
    const dir = await resultsDir({ ...study, runs: study.runs.slice(0, 7) });
    const run = await runLabHere(['report', '--no-calibrate', dir]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/^lab report: Partial study: 7 of \d+ planned runs recorded/);
    expect(await readFile(join(dir, 'report.md'), 'utf8')).toContain('> **Partial study: 7 of ');
  });

  it('in a downloaded results folder reads the latest study of studies/', async () => {
    const dir = tempDir('lab-report-studies-');
    for (const id of ['20251013-090000-aaaaaaaa', '20251014-090000-bbbbbbbb']) {
      await mkdir(join(dir, 'studies', id), { recursive: true });
      await writeFile(join(dir, 'studies', id, 'study.json'), JSON.stringify(fixtureStudy()));
    }
    await mkdir(join(dir, 'studies', '20251015-090000-cccccccc'), { recursive: true });
    const run = await runLabHere(['report', '--no-calibrate', dir]);
    expect(run.stderr).toBe('');
    expect(run.stdout).toContain(`read ${join(dir, 'studies', '20251014-090000-bbbbbbbb', 'study.json')}`);
    expect(existsSync(join(dir, 'report.md'))).toBe(true);
  });

  it('fails clearly when study.json is missing (through bin/launch.mjs, as a user runs it)', async () => {
    const dir = tempDir('lab-report-empty-');
    const run = runLabCli(['report', '--no-calibrate', dir]);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `lab report: ${join(dir, 'study.json')} not found: a results folder holds the study.json the runner writes\n`,
    );
    expect(run.stderr).not.toMatch(/\n\s+at /);
  });

  it('names the file and the first problems when it is not a study JSON', async () => {
    const study = fixtureStudy();
    const broken = {
      ...study,
      schemaVersion: 2,
      runs: study.runs.map((r, i) =>
        i === 3 ? { ...r, valid: 'yes', summary: { ...r.summary, hitRate: 4.2 } } : r,
      ),
    };
    const dir = await resultsDir(broken);
    const run = await runLabHere(['report', '--no-calibrate', dir]);
    expect(run.code).toBe(1);
    const file = join(dir, 'study.json');
    expect(run.stderr).toContain(`lab report: ${file} is not a study JSON (schema version 1): 3 problem(s)`);
    expect(run.stderr).toContain('  - schemaVersion: ');
    expect(run.stderr).toContain('  - runs[3].summary.hitRate: must be a fraction between 0 and 1');
    expect(run.stderr).toContain('  - runs[3].valid: ');
    expect(existsSync(join(dir, 'report.md'))).toBe(false);
  });
});
