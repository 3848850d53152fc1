import { appendFile, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { RunRecord, StudyRecord } from '../study/results.ts';
import {
  clientLogPath,
  clientResultPath,
  RUNNER_LOG_FILE,
  runRecordPath,
  STATUS_FILE,
  STUDY_FILE,
} from './layout.ts';
import type { ResultStore } from './ports.ts';
import type { StudyStatus } from './status.ts';

/**
 * The results folder on the node, mounted into the runner pod (layout.ts). JSON is written to a
 * temporary file and renamed over the old one, so a reader (the host's sync, `lab status`) never
 * sees half a file.
 */
export class FileResultStore implements ResultStore {
  constructor(private readonly root: string) {}

  async readClientResult(benchmarkId: string, resultFile: string): Promise<string | undefined> {
    return this.readOptional(clientResultPath(benchmarkId, resultFile));
  }

  async removeClientResult(benchmarkId: string, resultFile: string): Promise<void> {
    await rm(join(this.root, clientResultPath(benchmarkId, resultFile)), { force: true });
  }

  async writeClientLog(benchmarkId: string, log: string): Promise<void> {
    await this.writeAtomic(clientLogPath(benchmarkId), log);
  }

  async readStudy(): Promise<StudyRecord | undefined> {
    const text = await this.readOptional(STUDY_FILE);
    if (text === undefined) return undefined;
    try {
      return JSON.parse(text) as StudyRecord;
    } catch (error) {
      throw new Error(`${join(this.root, STUDY_FILE)} is not valid JSON: ${(error as Error).message}`);
    }
  }

  async writeStudy(study: StudyRecord): Promise<void> {
    await this.writeAtomic(STUDY_FILE, `${JSON.stringify(study, null, 2)}\n`);
  }

  async writeRun(record: RunRecord): Promise<void> {
    await this.writeAtomic(runRecordPath(record.id), `${JSON.stringify(record, null, 2)}\n`);
  }

  async writeStatus(status: StudyStatus): Promise<void> {
    await this.writeAtomic(STATUS_FILE, `${JSON.stringify(status, null, 2)}\n`);
  }

  async appendLog(line: string): Promise<void> {
    await mkdir(this.root, { recursive: true });
    await appendFile(join(this.root, RUNNER_LOG_FILE), `${line}\n`);
  }

  async readHostFile(name: string): Promise<string | undefined> {
    return this.readOptional(name);
  }

  private async readOptional(relative: string): Promise<string | undefined> {
    try {
      return await readFile(join(this.root, relative), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  private async writeAtomic(relative: string, text: string): Promise<void> {
    const path = join(this.root, relative);
    await mkdir(dirname(path), { recursive: true });
    const temporary = `${path}.tmp-${process.pid}`;
    await writeFile(temporary, text);
    await rename(temporary, path);
  }
}
