import type { Command } from 'commander';

/** `lab prereqs`: the commands that install the third-party prerequisites, in order. */
export function registerPrereqsCommand(program: Command): void {
  program
    .command('prereqs')
    .description(
      'print the commands that install the prerequisites (CRDs, controllers) before the lab manifests',
    )
    .option('--json', 'print the list as JSON (as in dist/prerequisites.json)')
    .action(async (options: { json?: boolean }) => {
      const { loadLabConfig } = await import('../config/load.ts');
      const { afterApplyCommands, installCommand, prerequisites } = await import(
        '../prereqs/prerequisites.ts'
      );
      const { config } = loadLabConfig({ file: program.opts().config });
      const list = prerequisites(config);
      if (options.json) {
        process.stdout.write(`${JSON.stringify(list, null, 2)}\n`);
        return;
      }
      const lines = list.prerequisites.flatMap((prerequisite) => [
        `# ${prerequisite.title}: ${prerequisite.reason}`,
        ...(prerequisite.unconfirmed ? [`# UNCONFIRMED: ${prerequisite.unconfirmed}`] : []),
        installCommand(prerequisite),
      ]);
      // Steps that belong between the lab's own files, e.g. Envoy Gateway's restart (lab-spec 3.6).
      const between = list.afterApply.flatMap((step) => [
        `# ${step.title}, right after applying ${step.after}.yaml: ${step.reason}`,
        ...afterApplyCommands(step),
      ]);
      process.stdout.write(`${[...lines, ...between].join('\n')}\n`);
    });
}
