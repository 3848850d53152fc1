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
  const parts = [...files].sort().map((file) => {
    const suffix = `__${basename(file, '.guard').replace(/\W/g, '_')}`;
    const text = code(file);
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
  path = join(mkdtempSync(join(tmpdir(), 'lab-guard-rules-')), 'control-tower.guard');
  writeFileSync(path, parts.join('\n'));
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
 * A rule file's text with its top-level variables and parameterized rules renamed (`name` to
 * `name<suffix>`). The files start every declaration at the start of a line (`let`, `rule`), so
 * the text splits into top-level blocks; a variable is not renamed inside a block that shadows it
 * (a parameter of a parameterized rule, or a `let` of its own): `rule check(sqs_queues)` reads its
 * parameter, not the file's `let sqs_queues`.
 */
function renamed(text: string, suffix: string): string {
  const globals = new Set([...text.matchAll(/^let\s+([A-Za-z_]\w*)\s*=/gm)].map((m) => m[1]));
  const helpers = new Set([...text.matchAll(/^rule\s+([A-Za-z_]\w*)\s*\(/gm)].map((m) => m[1]));
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
