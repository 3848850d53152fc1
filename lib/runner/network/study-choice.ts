import type { LabConfig } from '../../config/schema.ts';
import type { NetworkStudyRecord } from '../../network/study/model.ts';
import type { NetworkResultStore, NetworkStudyFiles } from '../ports.ts';
import { chooseLatestUnfinished, chooseStudyFolder } from '../study-files.ts';
import { configHash, newStudyId, type StudyChoice, smokeStudyId } from '../study-id.ts';

/** Which study a starting network runner works on (the first lab's shape, study-id.ts). */
export type NetworkStudyChoice = StudyChoice;

/**
 * The study to work on (as `chooseStudy` of study-id.ts for the first lab): with `fresh` a new
 * one; else the latest unfinished study of this cell whose id carries this configuration's hash;
 * else a new one.
 */
export function chooseNetworkStudy(
  stored: readonly NetworkStudyRecord[],
  config: LabConfig,
  cell: string,
  now: Date,
  fresh: boolean,
): NetworkStudyChoice {
  const hash = configHash(config);
  return chooseLatestUnfinished({
    fresh,
    newId: newStudyId(config, now),
    resumable: () =>
      stored
        .filter(
          (s) =>
            s.profile !== 'smoke' &&
            s.cell === cell &&
            s.state !== 'finished' &&
            s.studyId.endsWith(`-${hash}`),
        )
        .map((s) => ({ id: s.studyId, startedAt: s.startedAt })),
    resumeWhy: (latest) =>
      `study ${latest.id} (started ${latest.startedAt}) is an unfinished study of this cell and configuration`,
    noneWhy:
      stored.length === 0
        ? 'no earlier network study in the results folder'
        : `none of the ${stored.length} earlier studies is an unfinished study of cell ${cell} with this configuration`,
  });
}

/**
 * The cell's latest study other than `except` that did not finish (a new study after a stopped
 * one: what that runner may have left on the host), with the run records its study.json holds.
 */
export function lastStudyOf(
  studies: readonly NetworkStudyRecord[],
  cell: string,
  except: string,
): { study: NetworkStudyRecord; records: NetworkStudyRecord['runs'] } | undefined {
  const study = studies
    .filter((s) => s.cell === cell && s.studyId !== except && s.state !== 'finished')
    .sort((a, b) => Date.parse(a.startedAt) - Date.parse(b.startedAt))
    .at(-1);
  return study ? { study, records: study.runs } : undefined;
}

/**
 * The folder a cell's runner works in, and the studies on the shelf: a smoke study always starts
 * a new folder, which no full study resumes; a full study resumes the cell's latest unfinished one
 * of this configuration unless `lab run --new` asked otherwise. The shelf is read in both cases:
 * a stopped study may have left the host changed (conntrack-steps.ts, restoreAfterStop).
 */
export async function cellStudyFolder(
  store: NetworkResultStore,
  options: { config: LabConfig; cell: string; startedAt: Date; smoke: boolean },
  say: (line: string) => Promise<void>,
): Promise<{ choice: StudyChoice; files: NetworkStudyFiles; shelf: readonly NetworkStudyRecord[] }> {
  const { config, cell, startedAt } = options;
  if (options.smoke) {
    const id = smokeStudyId(config, startedAt);
    const { studies } = await store.listStudies();
    return {
      choice: { kind: 'new', id, why: 'a smoke study always starts afresh' },
      files: store.study(id),
      shelf: studies,
    };
  }
  let shelf: readonly NetworkStudyRecord[] = [];
  const { choice, files } = await chooseStudyFolder(
    store,
    (studies, fresh) => {
      shelf = studies;
      return chooseNetworkStudy(studies, config, cell, startedAt, fresh);
    },
    say,
  );
  return { choice, files, shelf };
}
