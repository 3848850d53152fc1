// Prints the configuration reference, or with --write puts it into README.md.
import { readFileSync, writeFileSync } from 'node:fs';
import { configReference, withReference } from '../lib/config/reference.ts';

if (process.argv.includes('--write')) {
  const readme = readFileSync('README.md', 'utf8');
  writeFileSync('README.md', withReference(readme));
  process.stdout.write('README.md: configuration reference updated\n');
} else {
  process.stdout.write(`${configReference()}\n`);
}
