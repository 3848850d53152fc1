import { type Command, CommanderError } from 'commander';

/**
 * `lab report <results-dir...>`: report.md and report.html from the study JSON of a results
 * folder. A network study (`lab: "network"`) may span several cells: give each cell's folder, or
 * the folder holding them (a downloaded results prefix with one folder per cell).
 */
export function registerReportCommand(program: Command): void {
  program
    .command('report')
    .description("write report.md and report.html (tables and charts) from a results folder's study.json")
    .argument(
      '<results-dir...>',
      "folder holding the study.json the runner wrote; for the network lab, each cell's folder or their parent",
    )
    .option('--out <dir>', 'folder for the reports (default: the results folder)')
    .option(
      '--baseline <cell>',
      'network lab: the cell every cell is compared with (default: the cell with kube-proxy iptables and no mesh)',
    )
    .option(
      '--no-calibrate',
      "skip refitting the timing model on the study's single-replica runs (the calibrated predictions take seconds)",
    )
    .action(
      async (resultsDirs: string[], options: { out?: string; calibrate: boolean; baseline?: string }) => {
        // Loaded on use: vega and vega-lite take a moment to load, and other commands need not wait.
        const { ReportWriteError, writeReport } = await import('../report/write.ts');
        const { StudyFileError } = await import('../report/load.ts');
        const { networkStudyFiles } = await import('../report/network/load.ts');
        const { writeNetworkReport } = await import('../report/network/write.ts');
        const { BaselineError } = await import('../report/network/baseline.ts');
        const fail = (message: string): never => {
          process.stderr.write(`lab report: ${message}\n`);
          throw new CommanderError(1, 'commander.error', `lab report: ${message}`);
        };
        try {
          const found = await Promise.all(
            resultsDirs.map(async (dir) => ({ dir, files: await networkStudyFiles(dir) })),
          );
          if (found.some((f) => f.files.length > 0)) {
            const without = found.filter((f) => f.files.length === 0).map((f) => f.dir);
            if (without.length > 0) {
              fail(
                `${without.join(', ')}: no network study (a study.json with lab: "network") in the folder or its cell folders`,
              );
            }
            if (resultsDirs.length > 1 && !options.out)
              fail('several results folders: choose where the report goes with --out');
            const written = await writeNetworkReport(
              found.flatMap((f) => f.files),
              options.out ?? resultsDirs[0],
              options.baseline === undefined ? {} : { baselineCell: options.baseline },
            );
            const read = written.studies.map((file) => `lab report: read ${file}\n`).join('');
            process.stdout.write(`${read}wrote ${written.markdown}\nwrote ${written.html}\n`);
            if (written.banner) process.stderr.write(`lab report: ${written.banner}\n`);
            return;
          }
          if (options.baseline !== undefined) {
            fail(
              '--baseline names a network-lab cell; this folder holds an LLM-gateway study, which has no cells',
            );
          }
          if (resultsDirs.length > 1) {
            fail(
              'several results folders make one report only for network-lab cells; give one LLM-gateway results folder',
            );
          }
          const [resultsDir] = resultsDirs;
          const written = await writeReport(resultsDir, options.out ?? resultsDir, {
            calibrate: options.calibrate,
          });
          process.stdout.write(
            `lab report: read ${written.study}\nwrote ${written.markdown}\nwrote ${written.html}\n`,
          );
          if (written.banner) process.stderr.write(`lab report: ${written.banner}\n`);
        } catch (error) {
          if (
            !(error instanceof StudyFileError) &&
            !(error instanceof ReportWriteError) &&
            !(error instanceof BaselineError)
          )
            throw error;
          fail(error.message);
        }
      },
    );
}
