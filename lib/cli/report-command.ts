import { type Command, CommanderError } from 'commander';

/** `lab report <results-dir>`: report.md and report.html from the study JSON of a results folder. */
export function registerReportCommand(program: Command): void {
  program
    .command('report')
    .description("write report.md and report.html (tables and charts) from a results folder's study.json")
    .argument('<results-dir>', 'folder holding the study.json the runner wrote')
    .option('--out <dir>', 'folder for the reports (default: the results folder)')
    .action(async (resultsDir: string, options: { out?: string }) => {
      // Loaded on use: vega and vega-lite take a moment to load, and other commands need not wait.
      const { ReportWriteError, writeReport } = await import('../report/write.ts');
      const { StudyFileError } = await import('../report/load.ts');
      try {
        const written = await writeReport(resultsDir, options.out ?? resultsDir);
        process.stdout.write(
          `lab report: read ${written.study}\nwrote ${written.markdown}\nwrote ${written.html}\n`,
        );
        if (written.banner) process.stderr.write(`lab report: ${written.banner}\n`);
      } catch (error) {
        if (!(error instanceof StudyFileError) && !(error instanceof ReportWriteError)) throw error;
        const message = `lab report: ${error.message}`;
        process.stderr.write(`${message}\n`);
        throw new CommanderError(1, 'commander.error', message);
      }
    });
}
