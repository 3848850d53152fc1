import { appendFileSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { RunRecord, StudyRecord } from '../study/results.ts';
import { type AnyChecklist, formatChecklist, type SmokeChecklist } from '../study/smoke-checklist.ts';
import {
  ATTEMPTS_DIR,
  attemptDir,
  clientResultPath,
  NEW_STUDY_REQUEST_FILE,
  REDO_INVALID_REQUEST_FILE,
  RUNNER_LOG_FILE,
  RUNS_DIR,
  runRecordPath,
  SMOKE_CHECKLIST_FILE,
  SMOKE_CHECKLIST_TEXT_FILE,
  SMOKE_REQUEST_FILE,
  STATUS_FILE,
  STUDIES_DIR,
  STUDY_FILE,
  studyDir,
} from './layout.ts';
import type { ResultStore, StudyFiles } from './ports.ts';
import type { StudyStatus } from './status.ts';
import { isStudyId, type StoredStudy } from './study-id.ts';

/**
 * The results folder on the node, mounted into the runner pod (layout.ts). JSON is written to a
 * temporary file and renamed over the old one, so a reader (the host's sync, `lab status`) never
 * sees half a file.
 */
export class FileResultStore implements ResultStore {
  constructor(private readonly root: string) {}

  async readClientResult(benchmarkId: string, resultFile: string): Promise<string | undefined> {
    return readOptional(join(this.root, clientResultPath(benchmarkId, resultFile)));
  }

  async removeClientResult(benchmarkId: string, resultFile: string): Promise<void> {
    await rm(join(this.root, clientResultPath(benchmarkId, resultFile)), { force: true });
  }

  async writeStatus(status: StudyStatus): Promise<void> {
    await writeAtomic(join(this.root, STATUS_FILE), `${JSON.stringify(status, null, 2)}\n`);
  }

  async readHostFile(name: string): Promise<string | undefined> {
    return readOptional(join(this.root, name));
  }

  listStudies(): Promise<{ studies: StoredStudy[]; unreadable: string[] }> {
    return scanStudies(this.root, async (id) => {
      const study = await this.study(id).readStudy();
      return study ? { id, metadata: study.metadata } : `no ${STUDY_FILE}`;
    });
  }

  takeNewStudyRequest(): Promise<boolean> {
    return takeRequest(join(this.root, NEW_STUDY_REQUEST_FILE));
  }

  takeRedoInvalidRequest(): Promise<boolean> {
    return takeRequest(join(this.root, REDO_INVALID_REQUEST_FILE));
  }

  takeSmokeRequest(): Promise<boolean> {
    return takeRequest(join(this.root, SMOKE_REQUEST_FILE));
  }

  study(studyId: string): StudyFiles {
    if (!isStudyId(studyId)) throw new Error(`"${studyId}" is not a study id (yyyymmdd-hhmmss-<8 hex>)`);
    return new FileStudyFiles(join(this.root, studyDir(studyId)));
  }
}

class FileStudyFiles implements StudyFiles {
  constructor(private readonly dir: string) {}

  readStudy(): Promise<StudyRecord | undefined> {
    return readJsonFile<StudyRecord>(join(this.dir, STUDY_FILE));
  }

  async writeStudy(study: StudyRecord): Promise<void> {
    await writeAtomic(join(this.dir, STUDY_FILE), `${JSON.stringify(study, null, 2)}\n`);
  }

  async writeRun(record: RunRecord): Promise<void> {
    await writeAtomic(join(this.dir, runRecordPath(record.id)), `${JSON.stringify(record, null, 2)}\n`);
  }

  async readRuns(): Promise<{ runs: RunRecord[]; unreadable: string[] }> {
    const { items, unreadable } = await readJsonFiles<RunRecord>(join(this.dir, RUNS_DIR));
    return { runs: items, unreadable };
  }

  claimAttempt(runId: string, atLeast: number): Promise<number> {
    return claimAttemptIn(this.dir, runId, atLeast);
  }

  async saveAttemptFile(runId: string, attempt: number, path: string, text: string): Promise<boolean> {
    if (!(await keepAttemptFile(this.dir, runId, attempt, path, text))) return false;
    await writeAtomic(join(this.dir, path), text);
    return true;
  }

  writeChecklist(checklist: SmokeChecklist): Promise<void> {
    return writeChecklistFiles(this.dir, checklist);
  }

  async appendLog(line: string): Promise<void> {
    const log = join(this.dir, RUNNER_LOG_FILE);
    inFolder(log, () => appendFileSync(log, `${line}\n`));
  }
}

/** A smoke checklist of either lab in its study folder: the JSON, and the text `lab status` prints (layout.ts). */
export async function writeChecklistFiles(studyFolder: string, checklist: AnyChecklist): Promise<void> {
  await writeAtomic(join(studyFolder, SMOKE_CHECKLIST_FILE), `${JSON.stringify(checklist, null, 2)}\n`);
  await writeAtomic(
    join(studyFolder, SMOKE_CHECKLIST_TEXT_FILE),
    `${formatChecklist(checklist).join('\n')}\n`,
  );
}

/**
 * Claims the next attempt number of a run in a study folder, at least `atLeast`: its folder
 * `attempts/<run-id>/<n>/` is created, and no later claim, by this runner or another, gets the
 * same number (a killed runner's attempt keeps its files). Both labs' study folders use it.
 */
export async function claimAttemptIn(studyFolder: string, runId: string, atLeast: number): Promise<number> {
  const runDir = join(studyFolder, ATTEMPTS_DIR, runId);
  await mkdir(runDir, { recursive: true });
  const taken = (await readdir(runDir)).map(Number).filter((n) => Number.isInteger(n));
  for (let n = Math.max(atLeast, ...taken.map((t) => t + 1)); ; n++) {
    try {
      // mkdir without `recursive` fails on a folder that exists: one claim per number.
      await mkdir(join(studyFolder, attemptDir(runId, n)));
      return n;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}

/**
 * Keeps one file of a run's attempt in `attempts/<run-id>/<n>/<path>` of a study folder,
 * write-once: false when the attempt already kept a file of that path (it is not replaced).
 */
export async function keepAttemptFile(
  studyFolder: string,
  runId: string,
  attempt: number,
  path: string,
  text: string,
): Promise<boolean> {
  const kept = join(studyFolder, attemptDir(runId, attempt), path);
  await mkdir(dirname(kept), { recursive: true });
  try {
    // `wx`: the attempt's file is written once and never replaced.
    await writeFile(kept, text, { flag: 'wx' });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
}

/** Whether a request file exists; it is removed. */
async function takeRequest(path: string): Promise<boolean> {
  if ((await readOptional(path)) === undefined) return false;
  await rm(path, { force: true });
  return true;
}

/** A JSON file, or undefined when it does not exist; text that is not JSON throws, naming the file. */
export async function readJsonFile<T>(path: string): Promise<T | undefined> {
  const text = await readOptional(path);
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as T;
  } catch (error) {
    throw new Error(`${path} is not valid JSON: ${(error as Error).message}`);
  }
}

/** Every `*.json` of a folder in name order (none when it does not exist), and the unreadable ones with why. */
export async function readJsonFiles<T>(dir: string): Promise<{ items: T[]; unreadable: string[] }> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { items: [], unreadable: [] };
    throw error;
  }
  const items: T[] = [];
  const unreadable: string[] = [];
  for (const name of names.filter((n) => n.endsWith('.json')).sort()) {
    const path = join(dir, name);
    try {
      items.push(JSON.parse(await readFile(path, 'utf8')) as T);
    } catch (error) {
      unreadable.push(`${path}: ${(error as Error).message}`);
    }
  }
  return { items, unreadable };
}

/** A file's text, or undefined when it does not exist. */
export async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

let writes = 0;

/**
 * Writes through a temporary file renamed over the target, so no reader sees half a file.
 *
 * The writes of the results folder (this, and `appendLog`) are synchronous system calls: the
 * runner writes status.json on every poll and a log line on every step, and node:fs/promises
 * sends each open, write, close and rename to libuv's thread pool and back, which cost about
 * three times the CPU of the calls themselves (measured: an atomic write of status.json 0.46 to
 * 0.84 ms of CPU, 0.2 ms synchronous; a log line 0.1 ms, 0.014 ms). The files, and what a reader
 * can see of them, are the same. The runner's process serves nothing (the results server is a
 * program of its own, results-server-main.ts), so a write of a few kB holding its event loop for
 * a fraction of a millisecond delays nothing else.
 */
export async function writeAtomic(path: string, text: string): Promise<void> {
  // Unique per write: the runs of a wave write the same files at once.
  const temporary = `${path}.tmp-${process.pid}-${++writes}`;
  inFolder(path, () => writeFileSync(temporary, text));
  renameSync(temporary, path);
}

/**
 * Runs a write into `path`'s folder, making the folder only when the write finds it missing.
 * status.json is written on every poll of the runner (every second): a `mkdir -p` before each
 * write doubled what a write cost.
 */
export function inFolder<T>(path: string, write: () => T): T {
  try {
    return write();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    mkdirSync(dirname(path), { recursive: true });
    return write();
  }
}

/**
 * The study folders under `studies/` of a results folder, in id order, each read by `take`: the
 * study it yields, or why the folder is not one (a string, or the error `take` threw). Both labs'
 * stores list their studies with it.
 */
export async function scanStudies<S>(
  root: string,
  take: (id: string) => Promise<S | string>,
): Promise<{ studies: S[]; unreadable: string[] }> {
  let names: string[];
  try {
    names = await readdir(join(root, STUDIES_DIR));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { studies: [], unreadable: [] };
    throw error;
  }
  const studies: S[] = [];
  const unreadable: string[] = [];
  for (const id of names.filter(isStudyId).sort()) {
    try {
      const study = await take(id);
      if (typeof study === 'string') unreadable.push(`${studyDir(id)}: ${study}`);
      else studies.push(study);
    } catch (error) {
      unreadable.push(`${studyDir(id)}: ${(error as Error).message}`);
    }
  }
  return { studies, unreadable };
}
