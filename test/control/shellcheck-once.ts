import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../temp.ts';

/** One of shellcheck's findings (`-f json1`), as far as a test reads it. */
export interface ShellcheckFinding {
  readonly file: string;
  readonly line: number;
  readonly level: string;
  readonly code: number;
  readonly message: string;
}

/**
 * shellcheck's findings for each of several bash scripts from one shellcheck run over all of them
 * (one process instead of one per script): call with the scripts by name, then the returned
 * function with a name; the run happens on the first call. Each script is checked as its own
 * file, as `shellcheck -s bash` checks one.
 */
export function shellcheckOnce(
  scripts: Readonly<Record<string, string>>,
): (name: string) => ShellcheckFinding[] {
  let findings: Map<string, ShellcheckFinding[]> | undefined;
  return (name) => {
    if (!findings) {
      const dir = tempDir('lab-shellcheck-');
      const files = Object.entries(scripts).map(([key, text], i) => {
        const file = join(dir, `script-${i}.sh`);
        writeFileSync(file, text);
        return [key, file] as const;
      });
      const run = spawnSync('shellcheck', ['-s', 'bash', '-f', 'json1', ...files.map(([, file]) => file)], {
        encoding: 'utf8',
      });
      if (run.error) throw run.error;
      // json1 goes to stdout whether or not shellcheck found something; stderr means it failed.
      if (run.stderr !== '' || run.stdout === '') throw new Error(`shellcheck failed: ${run.stderr}`);
      const { comments } = JSON.parse(run.stdout) as { comments: ShellcheckFinding[] };
      findings = new Map(files.map(([key, file]) => [key, comments.filter((c) => c.file === file)]));
    }
    const found = findings.get(name);
    if (!found) throw new Error(`no script named ${name}`);
    return found;
  };
}
