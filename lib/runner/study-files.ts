import type { StudyChoice } from './study-id.ts';

/**
 * The study folder as both labs' runners start it: which study to work on (new, or the latest
 * unfinished one to resume; `lab run --new` asks for a new one), the records it already holds,
 * and study.json written one at a time. Each lab keeps its own record types and its own
 * rule for which stored study is resumable.
 */

/** A run record as both labs keep them: one per run id, with when the run ended. */
export interface FinishedRun {
  readonly id: string;
  readonly finishedAt: string;
}

/** The results folder's studies, as both labs' result stores show them. */
export interface StudyShelf<Stored, Files> {
  /** Whether `lab run --new` asked for a fresh study; the request is removed. */
  takeNewStudyRequest(): Promise<boolean>;
  listStudies(): Promise<{ studies: Stored[]; unreadable: string[] }>;
  study(studyId: string): Files;
}

/** One study's folder: its study.json and its run files. */
export interface StudyFolder<Study, Run> {
  readStudy(): Promise<Study | undefined>;
  readRuns(): Promise<{ runs: Run[]; unreadable: string[] }>;
}

type Say = (line: string) => Promise<void>;

/** A stored study as the choice sees it: its id and when it started. */
export interface StudyCandidate {
  readonly id: string;
  readonly startedAt: string;
}

/** What `chooseLatestUnfinished` chooses from, in the lab's words. */
export interface StudyChoiceRule {
  /** `lab run --new` asked for a fresh study. */
  readonly fresh: boolean;
  /** The id of a new study (`newStudyId`). */
  readonly newId: string;
  /** The stored studies this runner may resume; only called without `fresh` (a broken folder must not stop `--new`). */
  readonly resumable: () => readonly StudyCandidate[];
  /** Why the latest resumable study is resumed, for the log. */
  readonly resumeWhy: (latest: StudyCandidate) => string;
  /** Why a new study is started when none is resumable. */
  readonly noneWhy: string;
}

/**
 * The study to work on: with `fresh` a new one; else the latest (by start time) of the
 * resumable studies; else a new one. `why` says which, for the log.
 */
export function chooseLatestUnfinished(rule: StudyChoiceRule): StudyChoice {
  const { newId } = rule;
  if (rule.fresh) return { kind: 'new', id: newId, why: 'lab run --new asked for a fresh study' };
  const latest = [...rule.resumable()].sort((a, b) => Date.parse(b.startedAt) - Date.parse(a.startedAt))[0];
  if (latest) return { kind: 'resume', id: latest.id, why: rule.resumeWhy(latest) };
  return { kind: 'new', id: newId, why: rule.noneWhy };
}

/**
 * Takes the `lab run --new` request, lists the stored studies (saying which could not be read)
 * and chooses one with `choose`; returns the choice and its folder.
 */
export async function chooseStudyFolder<Stored, Files>(
  store: StudyShelf<Stored, Files>,
  choose: (stored: readonly Stored[], fresh: boolean) => StudyChoice,
  say: Say,
): Promise<{ choice: StudyChoice; files: Files }> {
  const fresh = await store.takeNewStudyRequest();
  const { studies, unreadable } = await store.listStudies();
  for (const problem of unreadable) await say(`not a study to resume: ${problem}`);
  const choice = choose(studies, fresh);
  return { choice, files: store.study(choice.id) };
}

/**
 * A resumed study's records of the plan's runs: study.json's, then the run files', a run file
 * replacing study.json's record of its run when it ended later. A folder restored from S3 can
 * hold run files synced after its study.json, and a runner killed between the two writes leaves
 * the run file newer. The map keeps study.json's order, then the runs only a file holds.
 */
export function mergeRunRecords<Run extends FinishedRun>(
  planRunIds: readonly string[],
  fromStudy: readonly Run[],
  fromRunFiles: readonly Run[],
): Map<string, Run> {
  const inPlan = new Set(planRunIds);
  const records = new Map<string, Run>();
  for (const record of fromStudy) if (inPlan.has(record.id)) records.set(record.id, record);
  for (const record of fromRunFiles) {
    const known = records.get(record.id);
    if (inPlan.has(record.id) && (!known || Date.parse(record.finishedAt) > Date.parse(known.finishedAt)))
      records.set(record.id, record);
  }
  return records;
}

/**
 * The chosen study's study.json (when it is resumed) and its records of the plan's runs
 * (`mergeRunRecords`); run files that could not be read are said and left out.
 */
export async function readStudyRecords<
  Study extends { readonly runs: readonly Run[] },
  Run extends FinishedRun,
>(
  files: StudyFolder<Study, Run>,
  choice: StudyChoice,
  planRunIds: readonly string[],
  say: Say,
): Promise<{ existing: Study | undefined; records: Map<string, Run> }> {
  const existing = choice.kind === 'resume' ? await files.readStudy() : undefined;
  if (!existing) return { existing, records: mergeRunRecords(planRunIds, [], []) };
  const { runs, unreadable } = await files.readRuns();
  for (const problem of unreadable) await say(`run record not read: ${problem}`);
  return { existing, records: mergeRunRecords(planRunIds, existing.runs, runs) };
}

/**
 * study.json writes one at a time, each building the record when its turn comes: two runs ending
 * together (two replica pairs) must not leave the older snapshot last. A failed write fails its
 * caller only; the next one still runs.
 */
export class StudyWrites {
  private last: Promise<void> = Promise.resolve();

  write<T>(build: () => Promise<T>): Promise<T> {
    const turn = this.last.then(build);
    this.last = turn.then(
      () => undefined,
      () => undefined,
    );
    return turn;
  }
}
