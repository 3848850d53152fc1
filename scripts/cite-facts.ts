/**
 * Comments used to cite "lab-spec 4.1" and "network-lab-spec 7", a specification kept outside the
 * repository. The facts now live in docs/facts.md, whose sections keep those numbers (the network
 * lab's with an N), so a citation becomes "docs/facts.md §4.1" or "docs/facts.md §N7".
 *
 * `npx tsx scripts/cite-facts.ts` rewrites comment lines only (`//`, `/* ... *\/` bodies, shell `#`)
 * in lib/, charts/, bin/, scripts/ and test/, and Markdown in docs/ and README.md; strings in code
 * are left alone. test/docs/facts.test.ts fails while a comment still cites the old names.
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { REPO_ROOT } from './examples.ts';

/** Folders whose source comments are rewritten and checked. */
export const SOURCE_ROOTS = ['lib', 'charts', 'bin', 'scripts', 'test'];

const OLD_CITATION =
  /\b(network-)?lab-spec(?:\.md)?(?: (?:sections?|§) ?| )?(\d+(?:\.\d+)?(?:\s*(?:-|, | and )\s*\d+(?:\.\d+)?)*)?(?: point \d+)?/g;

/** One citation in the new form. */
function newCitation(network: string | undefined, sections: string | undefined): string {
  if (!sections) return network ? 'docs/facts.md (the network lab)' : 'docs/facts.md';
  const prefix = network ? 'N' : '';
  const numbered = sections.replace(/\d+(?:\.\d+)?/g, (n) => `${prefix}${n}`);
  return `docs/facts.md §${numbered}`;
}

/** A line with its old citations rewritten. */
export function citeFacts(line: string): string {
  return line.replace(OLD_CITATION, (_match, network: string | undefined, sections: string | undefined) =>
    newCitation(network, sections),
  );
}

/** Whether a source line is a comment line (where a citation may be rewritten). */
export function isCommentLine(line: string, file: string): boolean {
  const text = line.trimStart();
  if (file.endsWith('.sh')) return text.startsWith('#');
  return text.startsWith('//') || text.startsWith('*') || text.startsWith('/*');
}

/** Whether a line still cites the specification outside the repository. */
export function citesOldSpec(line: string): boolean {
  return /\blab-spec\b/.test(line);
}

/** Every source file under the roots (TypeScript, JavaScript and shell). */
export function sourceFiles(): string[] {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (name === 'node_modules') continue;
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.(ts|mts|mjs|js|sh)$/.test(name)) files.push(relative(REPO_ROOT, path));
    }
  };
  for (const root of SOURCE_ROOTS) walk(join(REPO_ROOT, root));
  return files.sort();
}

/** The file's text with the citations of its comment lines (for Markdown: its prose) rewritten. */
export function rewritten(text: string, file: string): string {
  const markdown = file.endsWith('.md');
  let fenced = false; // Markdown code blocks hold commands and what the tool prints: left alone
  return text
    .split('\n')
    .map((line) => {
      if (markdown && line.startsWith('```')) fenced = !fenced;
      const rewrite = markdown ? !fenced && !line.startsWith('```') : isCommentLine(line, file);
      return rewrite ? citeFacts(line) : line;
    })
    .join('\n');
}

if (process.argv[1] && import.meta.url.endsWith(relative(REPO_ROOT, process.argv[1]))) {
  const docs = readdirSync(join(REPO_ROOT, 'docs'))
    .filter((name) => name.endsWith('.md') && name !== 'facts.md')
    .map((name) => `docs/${name}`);
  // This file names the old forms on purpose.
  const files = [...sourceFiles().filter((file) => file !== 'scripts/cite-facts.ts'), ...docs, 'README.md'];
  let changed = 0;
  for (const file of files) {
    const path = join(REPO_ROOT, file);
    const text = readFileSync(path, 'utf8');
    const updated = rewritten(text, file);
    if (updated !== text) {
      writeFileSync(path, updated);
      changed += 1;
    }
  }
  process.stdout.write(`${changed} file(s) now cite docs/facts.md\n`);
}
