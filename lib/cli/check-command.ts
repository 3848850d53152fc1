import { type Command, CommanderError, InvalidArgumentError } from 'commander';

/** Exit codes of `lab check`: 1 when a lesson or schema is broken, 2 when the folder cannot be checked. */
export const CHECK_FAILED = 1;
export const CHECK_UNUSABLE = 2;

interface CheckCommandOptions {
  readonly json?: boolean;
  readonly kvCacheTokens?: number;
  readonly nodeCpu?: number;
  readonly nodeMemoryGib?: number;
}

function positiveNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('must be a positive number');
  return n;
}

function positiveInteger(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

/** Ends the command with an exit code; `runLab` turns commander errors into exit codes. */
function exitWith(code: number, message: string): never {
  process.stderr.write(`${message}\n`);
  throw new CommanderError(code, 'commander.error', message);
}

/** `lab check <dir>`: schema and lesson checks on any folder of manifests. */
export function registerCheckCommand(program: Command): void {
  program
    .command('check')
    .description(
      'check a folder of Kubernetes manifests (synthesized or hand-edited) against the Kubernetes schemas and the lessons of docs/facts.md §5',
    )
    .argument('<dir>', 'folder searched recursively for *.yaml, *.yml and *.json')
    .option('--json', 'print the findings as JSON')
    .option(
      '--kv-cache-tokens <n>',
      "KV cache tokens per replica for the workload lesson (default: the configuration's vllm.kvCacheTokensPerReplica)",
      positiveInteger,
    )
    .option(
      '--node-cpu <cores>',
      "allocatable CPU of the one node the resource budget is held against (default: the configuration's instance.vcpus; with cluster.agents the pods are fitted to each host instead)",
      positiveNumber,
    )
    .option(
      '--node-memory-gib <gib>',
      "allocatable memory (GiB) of the one node the resource budget is held against (default: the configuration's instance.memoryGiB; with cluster.agents the pods are fitted to each host instead)",
      positiveNumber,
    )
    .action(async (dir: string, options: CheckCommandOptions) => {
      // Loaded on use: the Kubernetes schemas take about a second to load, and other commands need not wait.
      const check = await import('../check/index.ts');
      const folder = await check.loadManifestFolder(dir).catch((error: unknown) => {
        if (error instanceof check.ManifestLoadError) exitWith(CHECK_UNUSABLE, `lab check: ${error.message}`);
        throw error;
      });
      if (folder.objects.length === 0) {
        exitWith(
          CHECK_UNUSABLE,
          `lab check: no Kubernetes objects found in ${dir} (looked for *.yaml, *.yml and *.json)`,
        );
      }
      // The placement rules judge against the configured node pools and cluster.
      const config = (await import('../config/load.ts')).loadLabConfig({
        file: program.opts().config,
      }).config;
      const placement = await import('../config/placement.ts');
      const { budgetNodes } = await import('../config/placement-fit.ts');
      const pods = placement.labPlacement(config);
      // A node size on the command line is the one node; else each host of the configuration.
      const oneNode = options.nodeCpu !== undefined || options.nodeMemoryGib !== undefined;
      const report = check.inspectManifests(folder.objects, {
        kvCacheTokensPerReplica: options.kvCacheTokens ?? config.vllm.kvCacheTokensPerReplica,
        nodeCpu: options.nodeCpu ?? config.instance.vcpus,
        nodeMemoryGiB: options.nodeMemoryGib ?? config.instance.memoryGiB,
        budgetCluster: oneNode
          ? undefined
          : { nodes: budgetNodes(config), runnerNodeSelector: pods.runner.nodeSelector },
        placement: pods,
        clusterRoles: placement.clusterNodeRoles(config),
      });
      const notes = [
        ...report.notes,
        ...folder.skipped.map((skipped) => ({
          object: '(document)',
          message: `skipped: ${skipped.reason}`,
          file: skipped.file,
        })),
      ];
      const summary = check.summarize({ ...report, notes }, folder.objects.length, folder.files.length);
      if (options.json) {
        const result = {
          dir,
          objects: folder.objects.length,
          files: folder.files,
          violations: report.violations,
          notes,
        };
        process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
      } else {
        const lines = [...report.violations.map(check.formatViolation), ...notes.map(check.formatNote)];
        if (lines.length > 0) process.stdout.write(`${lines.join('\n')}\n`);
      }
      if (report.violations.length > 0) exitWith(CHECK_FAILED, summary);
      process.stderr.write(`${summary}\n`);
    });
}
