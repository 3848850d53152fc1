import { describe, expect, it } from 'vitest';
import { defaultLabConfig } from '../../lib/config/load.ts';
import {
  chooseStudy,
  configHash,
  isStudyId,
  newStudyId,
  type StoredStudy,
} from '../../lib/runner/study-id.ts';
import type { StudyMetadata } from '../../lib/study/results.ts';

const config = defaultLabConfig();
const other = { ...config, workload: { ...config.workload, prompts: 2048 } };
const now = new Date('2025-10-14T12:30:05.000Z');

function stored(id: string, startedAt: string, extra: Partial<StudyMetadata> = {}, c = config): StoredStudy {
  return { id, metadata: { startedAt, config: c, versions: {}, gpuUuids: {}, ...extra } };
}

describe('study ids', () => {
  it('name the start time and the configuration', () => {
    const id = newStudyId(config, now);
    expect(id).toBe(`20251014-123005-${configHash(config)}`);
    expect(isStudyId(id)).toBe(true);
    expect(configHash(config)).toMatch(/^[0-9a-f]{8}$/);
    expect(configHash(other)).not.toBe(configHash(config));
    // Key order does not change the hash.
    expect(configHash({ ...config, namespace: config.namespace })).toBe(configHash(config));
    expect(isStudyId('study.json')).toBe(false);
  });
});

describe('chooseStudy', () => {
  it('resumes the latest unfinished study of the same configuration', () => {
    const choice = chooseStudy(
      [
        stored('20251013-090000-aaaaaaaa', '2025-10-13T09:00:00.000Z'),
        stored('20251014-090000-bbbbbbbb', '2025-10-14T09:00:00.000Z'),
        stored('20251014-100000-cccccccc', '2025-10-14T10:00:00.000Z', {
          finishedAt: '2025-10-14T11:00:00.000Z',
        }),
        stored('20251014-110000-dddddddd', '2025-10-14T11:00:00.000Z', {}, other),
      ],
      config,
      now,
      false,
    );
    expect(choice).toEqual({
      kind: 'resume',
      id: '20251014-090000-bbbbbbbb',
      why: 'study 20251014-090000-bbbbbbbb (started 2025-10-14T09:00:00.000Z) has the same configuration and is unfinished',
    });
  });

  it('starts a new study when asked (lab run --new), or when nothing fits', () => {
    const unfinished = [stored('20251014-090000-bbbbbbbb', '2025-10-14T09:00:00.000Z')];
    expect(chooseStudy(unfinished, config, now, true)).toMatchObject({
      kind: 'new',
      id: newStudyId(config, now),
    });
    expect(chooseStudy(unfinished, other, now, false)).toMatchObject({
      kind: 'new',
      why: 'none of the 1 earlier studies is an unfinished study of this configuration',
    });
    expect(chooseStudy([], config, now, false)).toMatchObject({
      kind: 'new',
      why: 'no earlier study in the results folder',
    });
  });
});
