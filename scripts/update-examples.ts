// Rewrites every marked example output in README.md and docs/*.md from what `lab` prints now
// (`npm run docs:examples`; the markers are described in scripts/examples.ts).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EXAMPLE_SOURCES } from './example-sources.ts';
import { currentOutputs, examplesOnDisk, REPO_ROOT, withTexts } from './examples.ts';

const files = examplesOnDisk();
const texts = await currentOutputs(files.flatMap(({ blocks }) => blocks.map((block) => block.spec)));
let changed = 0;
for (const { file, markdown, blocks } of files) {
  if (blocks.length === 0) continue;
  const updated = withTexts(markdown, texts, file);
  const stale = blocks.filter(
    (block) => texts.has(block.spec) && texts.get(block.spec) !== block.text,
  ).length;
  for (const block of blocks.filter((b) => !texts.has(b.spec)))
    process.stdout.write(
      `${file}: "${block.spec}" is made only by ${(block.source && EXAMPLE_SOURCES[block.source]?.checkedBy) || 'its test'}: when it fails, copy what it prints\n`,
    );
  if (updated !== markdown) writeFileSync(join(REPO_ROOT, file), updated);
  changed += stale;
  process.stdout.write(`${file}: ${blocks.length} example(s), ${stale} updated\n`);
}
process.stdout.write(changed === 0 ? 'every example is up to date\n' : `${changed} example(s) rewritten\n`);
