import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { StudyFileError } from '../../../lib/report/load.ts';
import {
  loadNetworkStudies,
  networkStudyFiles,
  parseNetworkStudy,
} from '../../../lib/report/network/load.ts';
import { networkStudyBanner } from '../../../lib/report/network/write.ts';
import { tempDir } from '../../temp.ts';
import { fixtureStudy } from '../fixture.ts';
import { fixtureCellStudy } from './fixture.ts';

async function put(dir: string, path: string, json: unknown): Promise<string> {
  const file = join(dir, path);
  await mkdir(join(file, '..'), { recursive: true });
  await writeFile(file, JSON.stringify(json));
  return file;
}

describe('networkStudyFiles', () => {
  it("a cell's folder: its own study.json, or its latest study under studies/", async () => {
    const dir = tempDir('lab-net-load-');
    const own = await put(dir, 'mesh/study.json', fixtureCellStudy('mesh'));
    expect(await networkStudyFiles(join(dir, 'mesh'))).toEqual([own]);
    await put(dir, 'dp/studies/20261127-090000-aaaaaaaa/study.json', fixtureCellStudy('dp-iptables'));
    const latest = await put(
      dir,
      'dp/studies/20261128-090000-bbbbbbbb/study.json',
      fixtureCellStudy('dp-iptables'),
    );
    expect(await networkStudyFiles(join(dir, 'dp'))).toEqual([latest]);
  });

  it('a downloaded results prefix: one study per cell folder, in name order', async () => {
    const dir = tempDir('lab-net-load-');
    const mesh = await put(dir, 'mesh/study.json', fixtureCellStudy('mesh'));
    const cilium = await put(
      dir,
      'dp-cilium/studies/20261128-090000-ee55ff66/study.json',
      fixtureCellStudy('dp-cilium'),
    );
    await mkdir(join(dir, 'empty-cell'));
    await writeFile(join(dir, 'notes.txt'), 'not a folder');
    expect(await networkStudyFiles(dir)).toEqual([cilium, mesh]);
  });

  it("the first lab's study, a missing folder and broken JSON are not network studies", async () => {
    const dir = tempDir('lab-net-load-');
    await put(dir, 'gateway/study.json', fixtureStudy());
    await mkdir(join(dir, 'broken'));
    await writeFile(join(dir, 'broken', 'study.json'), '{"lab": "network",');
    expect(await networkStudyFiles(join(dir, 'gateway'))).toEqual([]);
    expect(await networkStudyFiles(join(dir, 'broken'))).toEqual([]);
    expect(await networkStudyFiles(join(dir, 'nowhere'))).toEqual([]);
  });
});

describe('parseNetworkStudy', () => {
  it('accepts the fixture as JSON round-trips it', () => {
    const study = fixtureCellStudy('mesh');
    expect(parseNetworkStudy(JSON.parse(JSON.stringify(study)), 'study.json')).toEqual(study);
  });

  it('names the file and the first problems with their paths', () => {
    const study = fixtureCellStudy('dp-iptables');
    const broken = {
      ...study,
      datapath: 'ebpf',
      runs: study.runs.map((r, i) => (i === 3 ? { ...r, valid: 'yes', experiment: 'E11' } : r)),
    };
    let message = '';
    try {
      parseNetworkStudy(broken, '/r/study.json');
    } catch (error) {
      expect(error).toBeInstanceOf(StudyFileError);
      message = (error as Error).message;
    }
    expect(message).toMatch(
      /^\/r\/study\.json is not a network study JSON \(lab: "network"\): 3 problem\(s\)\n/,
    );
    expect(message).toContain('  - datapath: ');
    expect(message).toContain('  - runs[3].experiment: ');
    expect(message).toContain('  - runs[3].valid: ');
  });
});

describe('loadNetworkStudies', () => {
  it('refuses two studies of one cell', async () => {
    const dir = tempDir('lab-net-load-');
    const a = await put(dir, 'a/study.json', fixtureCellStudy('mesh'));
    const b = await put(dir, 'b/study.json', fixtureCellStudy('mesh'));
    await expect(loadNetworkStudies([a, b])).rejects.toThrow(
      `${b} and ${a} are both studies of cell mesh: give one folder per cell`,
    );
  });
});

describe('an interrupted network study', () => {
  it('loads (study.json state interrupted) and gets a banner naming the API stop', async () => {
    const dir = tempDir('lab-net-load-');
    const study = {
      ...fixtureCellStudy('mesh'),
      state: 'interrupted',
      error: 'the Kubernetes API did not answer get job/net-c-r2 for 15m00s (40 tries): connect ECONNREFUSED',
    };
    const file = await put(dir, 'mesh/study.json', study);
    const [loaded] = await loadNetworkStudies([file]);
    expect(loaded.state).toBe('interrupted');
    expect(networkStudyBanner([loaded])).toMatch(
      /^Partial study: cell mesh's study was interrupted by the Kubernetes API \(the Kubernetes API did not answer get job\/net-c-r2 for 15m00s .*\) after \d+ run record\(s\)\./,
    );
  });
});
