// Prints the configuration reference, or with --write puts it into docs/configuration.md.
import { readFileSync, writeFileSync } from 'node:fs';
import { configReference, withReference } from '../lib/config/reference.ts';

/** The docs page that holds the reference (the README links to it). */
const REFERENCE_PAGE = 'docs/configuration.md';

if (process.argv.includes('--write')) {
  const page = readFileSync(REFERENCE_PAGE, 'utf8');
  writeFileSync(REFERENCE_PAGE, withReference(page));
  process.stdout.write(`${REFERENCE_PAGE}: configuration reference updated\n`);
} else {
  process.stdout.write(`${configReference()}\n`);
}
