import { type ChildProcess, spawn } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  CloudFormationValidatePlugin,
  type IPolicyValidationContext,
  type IPolicyValidationPlugin,
  type PolicyValidationPluginReport,
} from 'aws-cdk-lib';

/**
 * aws-cdk-lib's built-in CloudFormation template validation (`CloudFormationValidatePlugin`, the
 * plugin `builtinCloudFormationValidation` adds), its engine run in a node process of its own:
 * for an App made with `builtinCloudFormationValidation: false` and this plugin added. The plugin
 * class, its options and its engine are the ones `cdk synth` runs (test/aws/cfn-validate-child.cjs);
 * the rest stays in the synthesizing process, as in `cdk synth`: the plugin's name is the built-in
 * one, so CDK applies the lab's acknowledgements (`CloudFormation-Validate::...`) and makes its
 * findings errors or warnings by cdk.json's `@aws-cdk/core:validateAgainstDefaultRules` alike
 * (aws-cdk-lib 2.276.0 core/lib/private/synthesis-validation.js, `validateTemplates`: by
 * `pluginName`).
 *
 * Why a process: the engine (WebAssembly) grows its memory page by page while it starts, and each
 * growth makes V8 collect the whole heap (docs/facts.md §7 point 8): about 700 full collections,
 * each costing in proportion to the process's heap. A test worker holds aws-cdk-lib, cdk8s and the
 * lab (hundreds of MB), a fresh node about 5 MB; and the child runs with V8's garbage collector on
 * its own thread (`--single-threaded-gc`, whose helper threads cost more than they save there)
 * and WebAssembly on V8's baseline compiler (`--liftoff-only`, docs/facts.md §7 point 4). One
 * child per worker answers every validation until `stopValidationEngine()`: the engine starts once,
 * as it does once per process in-process (the plugin's singleton).
 */
export class CloudFormationValidateInChild implements IPolicyValidationPlugin {
  readonly name = CloudFormationValidatePlugin.PLUGIN_NAME;
  private engineVersion = 'not run';

  /** The engine's version, as the plugin reports it (read after `validate`, as CDK does). */
  get version(): string {
    return this.engineVersion;
  }

  validate(context: IPolicyValidationContext): PolicyValidationPluginReport {
    const { version, report } = ask(context.stackTemplates);
    this.engineVersion = version;
    return report;
  }
}

const CHILD = fileURLToPath(new URL('./cfn-validate-child.cjs', import.meta.url));

/** The child of this worker: its process and the folder of its requests and answers. */
let engine: { child: ChildProcess; dir: string; asked: number } | undefined;

/** Ends this worker's validation child (it also ends when the worker does: its stdin closes). */
export function stopValidationEngine(): void {
  engine?.child.kill();
  engine = undefined;
}

/**
 * The child's answer for these templates. CDK calls a plugin synchronously, so this waits with
 * the thread blocked (`Atomics.wait`) until the answer's file appears or the child has ended.
 */
function ask(stackTemplates: IPolicyValidationContext['stackTemplates']): {
  version: string;
  report: PolicyValidationPluginReport;
} {
  engine ??= start();
  const { child, dir } = engine;
  const id = ++engine.asked;
  writeFileSync(join(dir, `${id}.request.tmp`), JSON.stringify(stackTemplates));
  renameSync(join(dir, `${id}.request.tmp`), join(dir, `${id}.request`));
  const answer = join(dir, `${id}.answer`);
  const tick = new Int32Array(new SharedArrayBuffer(4));
  while (!existsSync(answer)) {
    if (ended(child.pid)) {
      engine = undefined;
      throw new Error(`${CHILD} ended without answering: ${readFileSync(join(dir, 'stderr'), 'utf8')}`);
    }
    Atomics.wait(tick, 0, 0, 10);
  }
  const reply = JSON.parse(readFileSync(answer, 'utf8'));
  if (reply.error) throw new Error(`${CHILD}: ${reply.error}`);
  return reply;
}

function start(): NonNullable<typeof engine> {
  const dir = mkdtempSync(join(tmpdir(), 'lab-cfn-validate-'));
  const stderr = openSync(join(dir, 'stderr'), 'w');
  const child = spawn(process.execPath, ['--liftoff-only', '--single-threaded-gc', CHILD, dir], {
    stdio: ['pipe', 'ignore', stderr],
  });
  closeSync(stderr);
  // Neither the child nor its stdin keeps the worker's event loop alive.
  child.unref();
  (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return { child, dir, asked: 0 };
}

/** Whether a child process has exited (a zombie not reaped yet, the event loop being blocked, counts). */
function ended(pid: number | undefined): boolean {
  if (pid === undefined) return true;
  try {
    // /proc/<pid>/stat: "pid (comm) state ..."
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z') ?? true;
  } catch {
    return true;
  }
}
