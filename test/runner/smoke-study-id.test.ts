import { describe, expect, it } from 'vitest';
import { defaultLabConfig } from '../../lib/config/load.ts';
import {
  chooseStudy,
  isStudyId,
  newStudyId,
  type StoredStudy,
  smokeStudyId,
} from '../../lib/runner/study-id.ts';
import type { StudyMetadata } from '../../lib/study/results.ts';

const config = defaultLabConfig();
const at = new Date('2025-10-14T09:00:00.000Z');

function stored(id: string, extra: Partial<StudyMetadata> = {}): StoredStudy {
  return {
    id,
    metadata: { studyId: id, startedAt: at.toISOString(), config, versions: {}, gpuUuids: {}, ...extra },
  };
}

describe('smoke study ids', () => {
  it('differ from the full study’s started in the same second, and are study ids', () => {
    expect(smokeStudyId(config, at)).not.toBe(newStudyId(config, at));
    expect(isStudyId(smokeStudyId(config, at))).toBe(true);
  });

  it('a smoke study, even one that stopped unfinished, is never the study a runner resumes', () => {
    const smoke = stored(smokeStudyId(config, at), { profile: 'smoke' });
    expect(chooseStudy([smoke], config, new Date(at.getTime() + 60_000), false).kind).toBe('new');
    const full = stored(newStudyId(config, at));
    expect(chooseStudy([full, smoke], config, new Date(at.getTime() + 60_000), false)).toMatchObject({
      kind: 'resume',
      id: full.id,
    });
  });
});
