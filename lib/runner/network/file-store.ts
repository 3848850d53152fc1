import { appendFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { NetworkRunRecord, NetworkStudyRecord } from '../../network/study/model.ts';
import type { AnyChecklist } from '../../study/smoke-checklist.ts';
import {
  claimAttemptIn,
  FileResultStore,
  inFolder,
  keepAttemptFile,
  readJsonFile,
  readJsonFiles,
  readOptional,
  scanStudies,
  writeAtomic,
  writeChecklistFiles,
} from '../file-store.ts';
import { RUNNER_LOG_FILE, RUNS_DIR, runRecordPath, STUDY_FILE, studyDir } from '../layout.ts';
import type { NetworkResultStore, NetworkStudyFiles } from '../ports.ts';
import type { StudyStatus } from '../status.ts';
import { isStudyId } from '../study-id.ts';
import { jobOutputDir } from './layout.ts';

/** A cell's results folder on its node, mounted into the network runner's pod (layout.ts). */
export class FileNetworkResultStore implements NetworkResultStore {
  /** status.json, host files and `lab run --new` are the first lab's, file for file. */
  private readonly shared: FileResultStore;

  constructor(private readonly root: string) {
    this.shared = new FileResultStore(root);
  }

  readJobOutput(jobName: string, file: string): Promise<string | undefined> {
    return readOptional(join(this.root, jobOutputDir(jobName), file));
  }

  async removeJobOutput(jobName: string): Promise<void> {
    await rm(join(this.root, jobOutputDir(jobName)), { recursive: true, force: true });
  }

  writeStatus(status: StudyStatus): Promise<void> {
    return this.shared.writeStatus(status);
  }

  readHostFile(name: string): Promise<string | undefined> {
    return this.shared.readHostFile(name);
  }

  listStudies(): Promise<{ studies: NetworkStudyRecord[]; unreadable: string[] }> {
    return scanStudies(this.root, async (id) => {
      const study = await this.study(id).readStudy();
      if (study?.lab === 'network') return study;
      return study ? 'not a network study' : `no ${STUDY_FILE}`;
    });
  }

  takeNewStudyRequest(): Promise<boolean> {
    return this.shared.takeNewStudyRequest();
  }

  takeSmokeRequest(): Promise<boolean> {
    return this.shared.takeSmokeRequest();
  }

  study(studyId: string): NetworkStudyFiles {
    if (!isStudyId(studyId)) throw new Error(`"${studyId}" is not a study id (yyyymmdd-hhmmss-<8 hex>)`);
    return new FileNetworkStudyFiles(join(this.root, studyDir(studyId)));
  }
}

class FileNetworkStudyFiles implements NetworkStudyFiles {
  constructor(private readonly dir: string) {}

  readStudy(): Promise<NetworkStudyRecord | undefined> {
    return readJsonFile<NetworkStudyRecord>(join(this.dir, STUDY_FILE));
  }

  async readRuns(): Promise<{ runs: NetworkRunRecord[]; unreadable: string[] }> {
    const { items, unreadable } = await readJsonFiles<NetworkRunRecord>(join(this.dir, RUNS_DIR));
    return { runs: items, unreadable };
  }

  async writeStudy(study: NetworkStudyRecord): Promise<void> {
    await writeAtomic(join(this.dir, STUDY_FILE), `${JSON.stringify(study, null, 2)}\n`);
  }

  async writeRun(record: NetworkRunRecord): Promise<void> {
    await writeAtomic(join(this.dir, runRecordPath(record.id)), `${JSON.stringify(record, null, 2)}\n`);
  }

  claimAttempt(runId: string, atLeast: number): Promise<number> {
    return claimAttemptIn(this.dir, runId, atLeast);
  }

  saveAttemptFile(runId: string, attempt: number, file: string, text: string): Promise<boolean> {
    return keepAttemptFile(this.dir, runId, attempt, file, text);
  }

  writeChecklist(checklist: AnyChecklist): Promise<void> {
    return writeChecklistFiles(this.dir, checklist);
  }

  async appendLog(line: string): Promise<void> {
    const log = join(this.dir, RUNNER_LOG_FILE);
    inFolder(log, () => appendFileSync(log, `${line}\n`));
  }
}
