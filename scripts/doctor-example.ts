/**
 * Prints the `lab doctor` example of docs/first-run.md (the real command against the fake account
 * of test/doctor/docs-example.ts), or with --write puts it into the page.
 *
 * Run: npx tsx scripts/doctor-example.ts [--write]
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { exampleBlock, runExample, withExample } from '../test/doctor/docs-example.ts';

const PAGE = fileURLToPath(new URL('../docs/first-run.md', import.meta.url));
const { code, stdout } = await runExample();
const block = exampleBlock(stdout, code);
if (process.argv.includes('--write')) {
  writeFileSync(PAGE, withExample(readFileSync(PAGE, 'utf8'), block));
  process.stdout.write('docs/first-run.md: lab doctor example updated\n');
} else {
  process.stdout.write(`${block}\n`);
}
