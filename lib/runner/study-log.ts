import type { Clock } from './ports.ts';

/** Where a study's log lines are kept (`study.log` of a study folder, both labs' StudyFiles). */
export interface StudyLogFile {
  appendLog(line: string): Promise<void>;
}

/**
 * A runner's log, shared by both labs' runners: every line goes to stdout at once and, stamped
 * with the clock, into the study folder's log. Lines said before the study is chosen (no folder
 * yet) wait and go in first, with the next line said once the folder is known.
 */
export class StudyLog {
  private file: StudyLogFile | undefined;
  private readonly waiting: string[] = [];
  private last = '';

  constructor(
    private readonly clock: Clock,
    private readonly print: (line: string) => void,
  ) {}

  /** The last line said: status.json's message. */
  get message(): string {
    return this.last;
  }

  /** The study folder is chosen: from the next line on, lines (and the waiting ones) go there. */
  attach(file: StudyLogFile): void {
    this.file = file;
  }

  async say(line: string): Promise<void> {
    this.last = line;
    this.print(line);
    this.waiting.push(`${this.clock.now().toISOString()} ${line}`);
    if (!this.file) return;
    for (const stamped of this.waiting.splice(0)) await this.file.appendLog(stamped);
  }
}
