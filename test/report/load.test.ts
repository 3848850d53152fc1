import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadStudy, parseStudy, StudyFileError } from '../../lib/report/load.ts';
import { tempDir } from '../temp.ts';
import { fixtureStudy } from './fixture.ts';

async function studyFile(content: string): Promise<string> {
  const dir = tempDir('lab-report-load-');
  const file = join(dir, 'study.json');
  await writeFile(file, content);
  return file;
}

const messageOf = async (promise: Promise<unknown>): Promise<string> => {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StudyFileError);
  return (error as StudyFileError).message;
};

describe('loadStudy', () => {
  it('round-trips the study record the runner writes, configuration included', async () => {
    const study = fixtureStudy();
    const file = await studyFile(JSON.stringify(study));
    expect(await loadStudy(file)).toEqual(JSON.parse(JSON.stringify(study)));
  });

  it('lists the first five problems and counts the rest', () => {
    const study = fixtureStudy();
    const broken = { ...study, runs: study.runs.map((r) => ({ ...r, valid: 1 })) };
    let message = '';
    try {
      parseStudy(broken, '/results/study.json');
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message.split('\n')[0]).toBe(
      `/results/study.json is not a study JSON (schema version 1): ${study.runs.length} problem(s)`,
    );
    expect(message.match(/^ {2}- runs\[\d+\]\.valid: /gm)).toHaveLength(5);
    expect(message.split('\n').at(-1)).toBe(`  ... and ${study.runs.length - 5} more`);
  });

  it('names what is missing in an unrelated JSON file', () => {
    expect(() => parseStudy({ name: 'llm-gateway-lab' }, 'package.json')).toThrow(
      /^package\.json is not a study JSON \(schema version 1\): 3 problem\(s\)\n {2}- schemaVersion: .*\n {2}- metadata: .*\n {2}- runs: /,
    );
  });

  it('rejects text that is not JSON and a directory named study.json', async () => {
    const file = await studyFile('{"schemaVersion": 1,');
    expect(await messageOf(loadStudy(file))).toMatch(new RegExp(`^${file} is not JSON: `));
    const dir = tempDir('lab-report-dir-');
    await mkdir(join(dir, 'study.json'));
    expect(await messageOf(loadStudy(join(dir, 'study.json')))).toBe(
      `${join(dir, 'study.json')} is a directory, not a study JSON`,
    );
  });
});
