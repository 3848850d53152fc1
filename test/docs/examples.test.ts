import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLE_SOURCES } from '../../scripts/example-sources.ts';
import {
  blockText,
  currentOutputs,
  examplesOnDisk,
  findExamples,
  missingJsonLines,
  parseSpec,
  REPO_ROOT,
  runLabCaptured,
  sourceSpec,
  withTexts,
} from '../../scripts/examples.ts';

const files = examplesOnDisk();
/** The named sources another test file checks (ExampleSource.checkedBy): not run a second time here. */
const checkedElsewhere = new Set(
  Object.entries(EXAMPLE_SOURCES).flatMap(([name, source]) => (source.checkedBy ? [sourceSpec(name)] : [])),
);

describe('example outputs in README.md and docs/ (npm run docs:examples rewrites them)', () => {
  let texts: Map<string, string>;
  beforeAll(async () => {
    // Each distinct command runs once, in this process; the default plan's simulation is the slow one.
    texts = await currentOutputs(
      files
        .flatMap(({ blocks }) => blocks.map((block) => block.spec))
        .filter((spec) => !checkedElsewhere.has(spec)),
    );
  });

  it('marks the figures a newcomer reads first, and the examples that went stale before', () => {
    const specs = files.flatMap(({ file, blocks }) => blocks.map((block) => `${file}: ${block.spec}`));
    expect(specs).toEqual(
      expect.arrayContaining([
        'README.md: plan | ^Estimated study duration',
        'README.md: --config examples/network-lab.yaml plan | ^  cells run in parallel',
        'docs/network-lab.md: --config examples/network-lab.yaml plan',
        'docs/configuration.md: --config docs/examples/invalid-lab.yaml config',
        'docs/plan.md: plan',
        'docs/first-run.md: example-of: smoke-checklist',
        'docs/planning.md: example-of: calibration-table',
      ]),
    );
  });

  for (const { file, blocks } of files.filter(({ blocks }) => blocks.length > 0)) {
    it(`${file}: every example block is what the command prints now`, () => {
      for (const block of blocks.filter((b) => !checkedElsewhere.has(b.spec))) {
        const text = texts.get(block.spec);
        expect(text, `${file}: "${block.spec}" printed nothing that the filter kept`).not.toBe('');
        expect(block.text, `${file}: example "${block.spec}" is stale; run npm run docs:examples`).toBe(text);
      }
    });
  }
});

describe('named sources checked by another test file', () => {
  for (const [name, source] of Object.entries(EXAMPLE_SOURCES).filter(([, s]) => s.checkedBy)) {
    it(`${name}: ${source.checkedBy} compares the page's block with what the code makes`, () => {
      const test = readFileSync(join(REPO_ROOT, source.checkedBy ?? ''), 'utf8');
      const pages = files
        .filter(({ blocks }) => blocks.some((b) => b.source === name))
        .map(({ file }) => file);
      expect(pages, `no page shows ${name}`).not.toEqual([]);
      for (const page of pages)
        expect(test, `${source.checkedBy} must check ${page}'s ${name} block`).toContain(
          `sourceBlockOnPage('${page}', '${name}')`,
        );
    });
  }
});

describe('JSON excerpts in docs/ (checked, not generated)', () => {
  const excerpts = files.flatMap(({ file, markdown }) =>
    findExamples(markdown, file, true).map((block) => ({ file, block })),
  );

  it('each line is an object the command prints', async () => {
    expect(excerpts.length).toBeGreaterThan(0);
    for (const { file, block } of excerpts) {
      const output = await runLabCaptured(block.args);
      expect(missingJsonLines(output, block.text), `${file}: ${block.spec}`).toEqual([]);
    }
  });

  it('notices a value the command does not print', () => {
    const output = JSON.stringify({ cells: [{ conntrack: [{ runId: 'a', limit: 2048 }] }] });
    expect(missingJsonLines(output, '{"runId": "a", "limit": 2048}')).toEqual([]);
    expect(missingJsonLines(output, '{"runId": "a", "limit": 1024}')).toEqual([
      '{"runId": "a", "limit": 1024}',
    ]);
  });
});

describe('example markers', () => {
  const doc = [
    'intro',
    '<!-- example: plan --prefixes 8 | ^Verdict -->',
    '```text',
    'Verdict: stale',
    'second stale line',
    '```',
    'between',
    '<!-- example: config -->',
    '```',
    '```',
    'outro',
  ].join('\n');

  it('finds each block with its arguments, filter and current text', () => {
    const blocks = findExamples(doc);
    expect(blocks.map((b) => [b.args, b.filter?.source, b.text])).toEqual([
      [['plan', '--prefixes', '8'], '^Verdict', 'Verdict: stale\nsecond stale line'],
      [['config'], undefined, ''],
    ]);
  });

  it('replaces only the text between the fences, and nothing when the text is current', () => {
    const texts = new Map([
      ['plan --prefixes 8 | ^Verdict', 'Verdict: fresh'],
      ['config', 'a: 1\nb: 2'],
    ]);
    const updated = withTexts(doc, texts);
    expect(updated).toBe(
      doc
        .replace('Verdict: stale\nsecond stale line', 'Verdict: fresh')
        .replace('```\n```\noutro', '```\na: 1\nb: 2\n```\noutro'),
    );
    expect(withTexts(updated, texts)).toBe(updated);
  });

  it('keeps the lines a filter matches and shows the checkout path as a relative one', () => {
    const output = `Header\nVerdict: x (${REPO_ROOT}/docs/a.yaml)\nother\n\n`;
    expect(blockText(output, /^Verdict/)).toBe('Verdict: x (docs/a.yaml)');
    expect(blockText(output)).toBe('Header\nVerdict: x (docs/a.yaml)\nother');
  });

  it('finds the block of a named source, fenced or a Markdown table, and replaces a table row for row', () => {
    const page = [
      '<!-- example-of: table-source -->',
      '| a | b |',
      '|---|---|',
      '| 1 | 2 |',
      'after the table',
      '<!-- example-of: fenced-source -->',
      '```',
      'old',
      '```',
    ].join('\n');
    const blocks = findExamples(page);
    expect(blocks.map((b) => [b.spec, b.source, b.args, b.text])).toEqual([
      ['example-of: table-source', 'table-source', [], '| a | b |\n|---|---|\n| 1 | 2 |'],
      ['example-of: fenced-source', 'fenced-source', [], 'old'],
    ]);
    const texts = new Map([
      ['example-of: table-source', '| a | b |\n|---|---|\n| 3 | 4 |\n| 5 | 6 |'],
      ['example-of: fenced-source', 'new'],
    ]);
    expect(withTexts(page, texts)).toBe(
      page.replace('| 1 | 2 |', '| 3 | 4 |\n| 5 | 6 |').replace('```\nold\n```', '```\nnew\n```'),
    );
  });

  it('makes the block of a named source from its code, and names the sources when a marker names none', async () => {
    const sources = { greeting: { what: 'a test source', make: async () => 'hello\n\n' } };
    const texts = await currentOutputs(['example-of: greeting'], sources);
    expect(texts.get('example-of: greeting')).toBe('hello');
    await expect(currentOutputs(['example-of: nothing'], sources)).rejects.toThrow(
      'example-of marker names "nothing", which is no example source; allowed: greeting',
    );
    expect(() => findExamples('<!-- example-of: greeting -->\ntext', 'x.md')).toThrow(
      'x.md:1: example marker "example-of: greeting" must be followed by a fenced block or a table',
    );
  });

  it('refuses a marker without a block after it, or without arguments', () => {
    expect(() => findExamples('<!-- example: plan -->\ntext', 'x.md')).toThrow(
      'x.md:1: example marker "plan" must be followed by a fenced block',
    );
    expect(() => findExamples('<!-- example: plan -->\n```\nnever closed', 'x.md')).toThrow('is not closed');
    expect(() => parseSpec(' | ^x')).toThrow('names no lab arguments');
  });
});
