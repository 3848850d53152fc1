import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { REPO_ROOT } from '../../scripts/examples.ts';

const pages = new Map<string, string>();

/**
 * A page of the checkout (README.md, docs/*.md) as one line: each line break with the indentation
 * around it folded into one space, so a quoted sentence may wrap anywhere. Read once per process.
 */
export function pageText(file: string): string {
  let text = pages.get(file);
  if (text === undefined) {
    text = readFileSync(join(REPO_ROOT, file), 'utf8').replace(/\s*\n\s*/g, ' ');
    pages.set(file, text);
  }
  return text;
}

/** Fails naming the page and the words it should say (the whole page would be an unreadable message). */
export function expectQuoted(file: string, text: string): void {
  expect(pageText(file).includes(text), `${file} should say "${text}"`).toBe(true);
}
