import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { z } from 'zod';
import { LabConfigSchema } from './checked.ts';
import { describeIssues, LabConfigError } from './problems.ts';
import type { LabConfig } from './schema.ts';
import { configWarnings } from './warnings.ts';

/** The environment variable naming an override file; honoured by both synthesizers and the CLI. */
export const LAB_CONFIG_ENV = 'LAB_CONFIG';

/** A validated configuration, where it came from, and the warnings it deserves. */
export interface LoadedLabConfig {
  readonly config: LabConfig;
  /** `defaults`, or the override file's path. */
  readonly source: string;
  readonly warnings: readonly string[];
}

export interface LoadOptions {
  /** An explicit override file (CLI `--config`, CDK `-c labConfig=`); wins over `LAB_CONFIG`. */
  readonly file?: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
}

/** Loads the effective configuration: defaults merged with the override file, if any. */
export function loadLabConfig(options: LoadOptions = {}): LoadedLabConfig {
  const env = options.env ?? process.env;
  const file = options.file || env[LAB_CONFIG_ENV] || undefined;
  if (!file) return withWarnings(parseLabConfig({}, 'defaults'), 'defaults');
  const path = resolve(options.cwd ?? process.cwd(), file);
  const overrides = readOverrides(path);
  const loaded = withWarnings(parseLabConfig(overrides ?? {}, path), path);
  if (overrides !== undefined) return loaded;
  // An empty file is valid YAML for "no settings", but rarely what its author meant.
  return {
    ...loaded,
    warnings: [`${path} is empty: every setting has its default (the published lab)`, ...loaded.warnings],
  };
}

/** Validates an override object (already parsed) against the schema; throws `LabConfigError`. */
export function parseLabConfig(overrides: unknown, source = 'overrides'): LabConfig {
  const result = LabConfigSchema.safeParse(overrides, { reportInput: true });
  if (result.success) return result.data;
  throw new LabConfigError(describeIssues(result.error.issues, overrides, settingsAt), source);
}

/** The effective configuration of the published lab. */
export function defaultLabConfig(): LabConfig {
  return parseLabConfig({}, 'defaults');
}

function withWarnings(config: LabConfig, source: string): LoadedLabConfig {
  return { config, source, warnings: configWarnings(config) };
}

/** The file's settings, or undefined when it holds none (empty, or only comments). */
function readOverrides(path: string): object | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : String(error);
    throw new LabConfigError([{ setting: '(file)', message: `cannot read ${path}: ${reason}` }], path);
  }
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (error) {
    const message = error instanceof YAMLParseError ? error.message : String(error);
    throw new LabConfigError([{ setting: '(file)', message: `not valid YAML: ${message}` }], path);
  }
  if (data === null || data === undefined) return undefined;
  if (typeof data !== 'object' || Array.isArray(data)) {
    throw new LabConfigError(
      [{ setting: '(file)', message: 'must be a YAML mapping of settings, e.g. "vllm: {replicas: 2}"' }],
      path,
    );
  }
  return data;
}

type JsonSchemaNode = { properties?: Record<string, JsonSchemaNode>; items?: JsonSchemaNode };
let jsonSchema: JsonSchemaNode | undefined;

/** The settings allowed at a path, for "unknown setting" messages. */
export function settingsAt(path: readonly PropertyKey[]): string[] {
  jsonSchema ??= z.toJSONSchema(LabConfigSchema, { io: 'input', unrepresentable: 'any' }) as JsonSchemaNode;
  let node: JsonSchemaNode | undefined = jsonSchema;
  for (const key of path) {
    node = typeof key === 'number' ? node?.items : node?.properties?.[String(key)];
  }
  return Object.keys(node?.properties ?? {});
}
