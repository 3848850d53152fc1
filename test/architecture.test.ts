import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The layers of docs/architecture.md, lowest first. A file may import files of its own layer and
 * of the layers listed in its `imports`; the first layer whose pattern matches a file owns it.
 */
const LAYERS = [
  {
    name: 'facts',
    files: /^lib\/facts\//,
    imports: [],
  },
  {
    name: 'config rules',
    files: /^lib\/config\/(rules|checked|placement-fit|warnings|load|report)\.ts$/,
    imports: ['facts', 'config', 'study'],
  },
  { name: 'config', files: /^lib\/config\//, imports: ['facts'] },
  { name: 'study', files: /^lib\/study\//, imports: ['facts', 'config'] },
  { name: 'the rest', files: /^(lib|charts|bin)\//, imports: ['facts', 'config', 'study', 'config rules'] },
] as const;

type LayerName = (typeof LAYERS)[number]['name'];

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && /\.(ts|mts|mjs)$/.test(entry.name))
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)));
}

// Static imports and exports (`import ... from '...'`, `export ... from '...'`, `import '...'`) and
// dynamic ones (`await import('...')`): the CLI loads its commands lazily.
const IMPORT = /(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)['"](\.{1,2}\/[^'"]+)['"]/gm;

/** The repository files a source file imports, as paths from the root. */
function importsOf(file: string, text: string): string[] {
  return [...text.matchAll(IMPORT)].map((match) => relative(ROOT, resolve(ROOT, dirname(file), match[1])));
}

function layerOf(file: string): LayerName | undefined {
  return LAYERS.find((layer) => layer.files.test(file))?.name;
}

/** `a.ts (layer) imports b.ts (layer)` for each import against the layers. */
function violations(files: readonly { file: string; text: string }[]): string[] {
  const found: string[] = [];
  for (const { file, text } of files) {
    const from = layerOf(file);
    const layer = LAYERS.find((l) => l.name === from);
    if (!layer) continue;
    for (const target of importsOf(file, text)) {
      const to = layerOf(target);
      if (to === undefined || to === from || (layer.imports as readonly string[]).includes(to)) continue;
      found.push(`${file} (${from}) imports ${target} (${to})`);
    }
  }
  return found;
}

describe('the layers of docs/architecture.md', () => {
  const files = ['lib', 'charts', 'bin'].flatMap(sources);

  it('hold every import of lib/, charts/ and bin/', () => {
    expect(files.length).toBeGreaterThan(100);
    const all = files.map((file) => ({ file, text: readFileSync(join(ROOT, file), 'utf8') }));
    expect(violations(all)).toEqual([]);
  });

  it('catch an import against them, static or dynamic', () => {
    expect(
      violations([
        { file: 'lib/config/schema.ts', text: "import { studyArms } from '../study/arms.ts';" },
        { file: 'lib/study/plan.ts', text: "const { LabStack } = await import('../aws/lab-stack.ts');" },
        { file: 'lib/study/arms.ts', text: "import { crossCheck } from '../config/rules.ts';" },
        { file: 'lib/config/cluster.ts', text: "export { labStack } from '../aws/lab-stack.ts';" },
        { file: 'lib/cli/program.ts', text: "import { studyArms } from '../study/arms.ts';" },
        { file: 'lib/config/cluster.ts', text: "import { onDemandQuotaFor } from '../aws/instances.ts';" },
        { file: 'lib/config/rules.ts', text: "import { STEP_NAMES } from '../aws/bootstrap/budgets.ts';" },
        { file: 'lib/facts/budgets.ts', text: "import type { LabConfig } from '../config/schema.ts';" },
      ]),
    ).toEqual([
      'lib/config/schema.ts (config) imports lib/study/arms.ts (study)',
      'lib/study/plan.ts (study) imports lib/aws/lab-stack.ts (the rest)',
      'lib/study/arms.ts (study) imports lib/config/rules.ts (config rules)',
      'lib/config/cluster.ts (config) imports lib/aws/lab-stack.ts (the rest)',
      'lib/config/cluster.ts (config) imports lib/aws/instances.ts (the rest)',
      'lib/config/rules.ts (config rules) imports lib/aws/bootstrap/budgets.ts (the rest)',
      'lib/facts/budgets.ts (facts) imports lib/config/schema.ts (config)',
    ]);
  });

  it('give the cross-field rules their own layer above the study model', () => {
    expect(layerOf('lib/config/rules.ts')).toBe('config rules');
    expect(layerOf('lib/config/schema.ts')).toBe('config');
    expect(layerOf('lib/study/arms.ts')).toBe('study');
    expect(layerOf('charts/lab-app.ts')).toBe('the rest');
  });

  it('keep the facts at the bottom, out of lib/aws: nothing in lib/config imports lib/aws', () => {
    expect(layerOf('lib/facts/instances.ts')).toBe('facts');
    expect(layerOf('lib/facts/budgets.ts')).toBe('facts');
    expect(layerOf('lib/aws/lab-stack.ts')).toBe('the rest');
    const config = files.filter((file) => file.startsWith('lib/config/'));
    expect(config.length).toBeGreaterThan(10);
    const intoAws = config.flatMap((file) =>
      importsOf(file, readFileSync(join(ROOT, file), 'utf8'))
        .filter((target) => target.startsWith('lib/aws/'))
        .map((target) => `${file} imports ${target}`),
    );
    expect(intoAws).toEqual([]);
  });
});
