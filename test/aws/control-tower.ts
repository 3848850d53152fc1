import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { CfnGuardValidator } from '@cdklabs/cdk-validator-cfnguard';
import type {
  IPolicyValidationContextBeta1,
  IPolicyValidationPluginBeta1,
  PolicyValidationPluginReportBeta1,
} from 'aws-cdk-lib';

/**
 * The AWS Control Tower proactive controls, run by cfn-guard, as a policy validation plugin whose
 * findings are errors.
 *
 * Why the wrapper: `CfnGuardValidator` (@cdklabs/cdk-validator-cfnguard 0.0.62, lib/plugin.js,
 * `execGuard`) reports violations without a `severity`. Once any finding of a report is
 * acknowledged, aws-cdk-lib 2.276.0 recomputes the report's success from the remaining
 * violations' severities (core/lib/private/synthesis-validation.js, `collectSuppressions`:
 * `violations.every(v => v.severity !== 'error' && v.severity !== 'fatal')`), so an
 * unacknowledged new finding without a severity would pass synth. Marking them errors keeps
 * every unacknowledged rule fatal.
 */
export class ControlTowerChecks implements IPolicyValidationPluginBeta1 {
  private readonly guard = new CfnGuardValidator();
  readonly name = this.guard.name;
  readonly version = this.guard.version;
  readonly ruleIds = this.guard.ruleIds;

  validate(context: IPolicyValidationContextBeta1): PolicyValidationPluginReportBeta1 {
    // Only the rule files that can select a resource of these templates: the same findings (a rule
    // file names the types it checks, docs/facts.md §7) for a fraction of the CPU: cfn-guard ran
    // all 237 files for every synth, 19 to 61 s of CPU per stack; the 44 that apply, 4.5 to 10 s.
    // lab-stack.test.ts runs the full set once and checks both give the same findings.
    const report = guardReport(context.templatePaths, rulesNotApplying(context.templatePaths));
    return {
      ...report,
      violations: report.violations.map((violation) => ({
        ...violation,
        severity: violation.severity ?? 'error',
      })),
    };
  }
}

/** cfn-guard's reports so far in this worker, by the templates' content and the rules left out. */
const reports = new Map<string, PolicyValidationPluginReportBeta1>();

/**
 * What `CfnGuardValidator` reports on these templates with these rule files disabled, run once per
 * worker for the same templates (file name and content: an identical stack synthesized again, into
 * another folder, is not checked again). The report is the plugin's, before ControlTowerChecks
 * marks its findings errors; its findings point at these paths.
 */
export function guardReport(
  templatePaths: readonly string[],
  disabledRules: readonly string[],
): PolicyValidationPluginReportBeta1 {
  const hash = createHash('sha256');
  // Parsed and printed again: the same template from app.synth() or from Template.toJSON().
  for (const path of templatePaths) {
    hash.update(`${basename(path)}\0${JSON.stringify(JSON.parse(readFileSync(path, 'utf8')))}\0`);
  }
  hash.update(JSON.stringify([...disabledRules].sort()));
  const key = hash.digest('hex');
  let report = reports.get(key);
  if (!report) {
    // The rule files left in, as one rules file: one pass of cfn-guard instead of one per file.
    const enabled = typesOfRules().filter((rule) => !disabledRules.includes(rule.name));
    report = new CfnGuardValidator({
      controlTowerRulesEnabled: false,
      rules: [combinedRules(enabled.map((rule) => rule.file))],
    }).validate({ templatePaths: [...templatePaths] } as IPolicyValidationContextBeta1);
    reports.set(key, report);
  }
  const byName = new Map(templatePaths.map((path) => [basename(path), path]));
  return {
    ...report,
    violations: report.violations.map((violation) => ({
      ...violation,
      violatingResources: violation.violatingResources.map((at) => ({
        ...at,
        templatePath: byName.get(basename(at.templatePath)) ?? at.templatePath,
      })),
    })),
  };
}

/** The Control Tower rule files the plugin ships (rules/control-tower/cfn-guard/<service>/*.guard). */
const RULES = join(
  dirname(createRequire(import.meta.url).resolve('@cdklabs/cdk-validator-cfnguard')),
  '..',
  'rules',
  'control-tower',
  'cfn-guard',
);

/** Each rule file: its path, its name (as `disabledRules` takes it) and the resource types its code names. */
let ruleTypes: { file: string; name: string; types: string[] }[] | undefined;
function typesOfRules() {
  ruleTypes ??= readdirSync(RULES, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.guard'))
    .sort()
    .map((file) => {
      const types = [...code(join(RULES, file)).matchAll(/["'](AWS::[A-Za-z0-9]+::[A-Za-z0-9]+)["']/g)].map(
        (m) => m[1],
      );
      return { file: join(RULES, file), name: basename(file, '.guard'), types };
    });
  return ruleTypes;
}

/** A rule file's text without its comment lines. */
function code(file: string): string {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('#'))
    .join('\n');
}

/** The combined rules files written so far in this worker, by the rule files they hold. */
const combined = new Map<string, string>();

/**
 * One rules file holding these Control Tower rule files, for a single cfn-guard pass instead of
 * one per file (about a fifth less CPU per check, docs/facts.md §7 point 6). The files share
 * helper names, so each file's variables and parameterized rules get the file's name as a suffix;
 * its named rules, which the findings report (`ruleName`), keep their names, and a name two files
 * define fails here rather than merging two rules. Compared in full (rule, description, fix,
 * resources, locations) with the files one by one on the lab's three stack shapes and a broken
 * template when introduced; control-tower.test.ts checks a broken resource of every family.
 */
export function combinedRules(files: readonly string[]): string {
  const key = [...files].sort().join('\n');
  let path = combined.get(key);
  if (path) return path;
  const owner = new Map<string, string>();
  const selections = new Map<string, string>();
  const parts = [...files].sort().map((file) => {
    const suffix = `__${basename(file, '.guard').replace(/\W/g, '_')}`;
    const text = code(file);
    for (const { shared, type } of typeSelections(text).values()) selections.set(shared, type);
    for (const [, name] of text.matchAll(/^rule\s+([A-Za-z_]\w*)\s+(?:when\b|\{)/gm)) {
      const other = owner.get(name);
      if (other && other !== file) {
        throw new Error(
          `Control Tower rules: ${file} and ${other} both define rule ${name}; they cannot share a rules file`,
        );
      }
      owner.set(name, file);
    }
    return `# ${basename(file)}\n${renamed(text, suffix)}`;
  });
  // Each resource type's selection once, for every file that selects it.
  const shared = [...selections]
    .sort()
    .flatMap(([name, type]) => [
      `let ${name}_type = "${type}"`,
      `let ${name} = Resources.*[ Type == %${name}_type ]`,
    ]);
  path = join(mkdtempSync(join(tmpdir(), 'lab-guard-rules-')), 'control-tower.guard');
  writeFileSync(path, [`# The resource types' selections\n${shared.join('\n')}\n`, ...parts].join('\n'));
  combined.set(key, path);
  return path;
}

/** The name of every Control Tower rule file the plugin ships. Exported for lab-stack.test.ts. */
export function allRules(): string[] {
  return typesOfRules().map((rule) => rule.name);
}

/**
 * The rule files that name resource types, none of which the templates hold (a file that names no
 * type is kept). Exported for lab-stack.test.ts.
 */
export function rulesNotApplying(templatePaths: readonly string[]): string[] {
  const present = new Set(
    templatePaths.flatMap((path) =>
      Object.values(
        (JSON.parse(readFileSync(path, 'utf8')) as { Resources?: Record<string, { Type: string }> })
          .Resources ?? {},
      ).map((resource) => resource.Type),
    ),
  );
  return typesOfRules()
    .filter((rule) => rule.types.length > 0 && !rule.types.some((type) => present.has(type)))
    .map((rule) => rule.name);
}

/**
 * The top-level variables of a rule file that select the resources of one type, the way nearly
 * every Control Tower rule file does (`let s3_buckets = Resources.*[ Type == %S3_BUCKET_TYPE ]`,
 * with `let S3_BUCKET_TYPE = "AWS::S3::Bucket"`), by name: the type, and the name of the one
 * variable the combined file gives that type's selection.
 *
 * Why: cfn-guard 3.1.1 evaluates a variable once per run, and such a query costs in proportion to
 * every resource of the template (about 60 ms on the default stack; measured, docs/facts.md §7
 * point 6); the 237 files hold 246 of them, on 87 types (243 in the form read here). One variable per type
 * gives each rule the same resources for less CPU. Other forms keep their own variable.
 */
function typeSelections(text: string): Map<string, { type: string; shared: string }> {
  const constants = new Map<string, string[]>();
  for (const [, name, type] of text.matchAll(/^let\s+([A-Za-z_]\w*)\s*=\s*"(AWS::\w+::\w+)"\s*$/gm)) {
    constants.set(name, [...(constants.get(name) ?? []), type]);
  }
  const selections = new Map<string, { type: string; shared: string }>();
  for (const [, name, constant] of text.matchAll(
    /^let\s+([A-Za-z_]\w*)\s*=\s*Resources\.\*\[\s*Type\s*==\s*%([A-Za-z_]\w*)\s*\]\s*$/gm,
  )) {
    const types = constants.get(constant) ?? [];
    // A variable defined twice in a file, or a constant of two values, keeps its own form.
    const definitions = text.match(new RegExp(`^let\\s+${name}\\s*=`, 'gm')) ?? [];
    if (types.length !== 1 || definitions.length !== 1) continue;
    selections.set(name, { type: types[0], shared: `lab_resources_of_${types[0].replace(/\W+/g, '_')}` });
  }
  return selections;
}

/**
 * A rule file's text with its top-level variables and parameterized rules renamed (`name` to
 * `name<suffix>`), and its selections of one resource type (typeSelections) read from the combined
 * file's shared variable of that type instead of its own. The files start every declaration at the
 * start of a line (`let`, `rule`), so the text splits into top-level blocks; a variable is not
 * renamed inside a block that shadows it (a parameter of a parameterized rule, or a `let` of its
 * own): `rule check(sqs_queues)` reads its parameter, not the file's `let sqs_queues`.
 */
function renamed(text: string, suffix: string): string {
  const globals = new Set([...text.matchAll(/^let\s+([A-Za-z_]\w*)\s*=/gm)].map((m) => m[1]));
  const helpers = new Set([...text.matchAll(/^rule\s+([A-Za-z_]\w*)\s*\(/gm)].map((m) => m[1]));
  const selections = typeSelections(text);
  const blocks = text.split(/^(?=let\s|rule\s)/m);
  return blocks
    .map((block) => {
      const params = /^rule\s+\w+\s*\(([^)]*)\)/.exec(block)?.[1] ?? '';
      const shadows = new Set([
        ...params.split(',').map((param) => param.trim()),
        ...(block.startsWith('rule')
          ? [...block.matchAll(/^\s*let\s+([A-Za-z_]\w*)/gm)].map((m) => m[1])
          : []),
      ]);
      let out = block;
      for (const name of globals) {
        if (shadows.has(name)) continue;
        const selection = selections.get(name);
        if (selection) {
          out = out
            .replace(new RegExp(`^let\\s+${name}\\s*=.*$`, 'm'), '')
            .replace(new RegExp(`%${name}\\b`, 'g'), `%${selection.shared}`);
          continue;
        }
        out = out
          .replace(new RegExp(`^let\\s+${name}(\\s*=)`), `let ${name}${suffix}$1`)
          .replace(new RegExp(`%${name}\\b`, 'g'), `%${name}${suffix}`);
      }
      for (const name of helpers) {
        out = out.replace(new RegExp(`(?<![.\\w])${name}\\s*\\(`, 'g'), `${name}${suffix}(`);
      }
      return out;
    })
    .join('');
}
