/**
 * The folder trees the pages draw (`<!-- file-layout: <name> -->` above a fenced block), checked
 * against the files the lab's code really writes: the test that already runs that code (a
 * rehearsal's results folder, a synthesis's dist/) lists them and calls layoutProblems. Free of
 * vitest, like the other docs helpers.
 *
 * A tree is one entry per line: its path first (a folder ends with `/`), then at least two spaces
 * and what it is. Each level is indented two spaces under its folder; the first line is the tree's
 * root. A path may hold placeholders (`<run-id>`); a placeholder repeated in one path stands for
 * the same text (`<benchmark-id>/<benchmark-id>.json`).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { REPO_ROOT } from '../../scripts/examples.ts';

const MARKER = /^<!-- file-layout: (\S+) -->\s*$/;

/** The file entries of a page's tree, as paths from its root (folders only give their children a place). */
export function layoutFiles(file: string, name: string): string[] {
  const lines = readFileSync(join(REPO_ROOT, file), 'utf8').split('\n');
  const at = lines.findIndex((line) => MARKER.exec(line)?.[1] === name);
  if (at < 0) throw new Error(`${file} has no <!-- file-layout: ${name} --> block`);
  if (!lines[at + 1]?.startsWith('```'))
    throw new Error(`${file}:${at + 1}: the file-layout marker "${name}" must be followed by a fenced block`);
  const end = lines.findIndex((line, i) => i > at + 1 && line.startsWith('```'));
  if (end < 0)
    throw new Error(`${file}:${at + 1}: the block after the file-layout marker "${name}" is not closed`);
  const folders: string[] = []; // folders[level - 1]: the folder a line of that level is in
  const files: string[] = [];
  for (const [i, line] of lines.slice(at + 3, end).entries()) {
    const indent = line.length - line.trimStart().length;
    const path = line.trim().split(/\s+/)[0] ?? '';
    if (path === '') continue;
    if (indent % 2 !== 0 || indent < 2 || indent / 2 > folders.length + 1)
      throw new Error(
        `${file}:${at + 4 + i}: "${path}" is not indented two spaces per level under its folder`,
      );
    const level = indent / 2;
    folders.length = level - 1;
    const full = [...folders, path].join('');
    if (path.endsWith('/')) folders.push(path);
    else files.push(full);
  }
  return files;
}

/** A path of the tree as a pattern over real paths. */
export function layoutPattern(path: string): RegExp {
  const seen = new Set<string>();
  const source = path
    .split(/(<[^>]+>)/)
    .map((part) => {
      const placeholder = /^<([^>]+)>$/.exec(part)?.[1];
      if (placeholder === undefined) return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      const group = placeholder.replace(/[^A-Za-z0-9]/g, '_');
      if (seen.has(group)) return `\\k<${group}>`;
      seen.add(group);
      return `(?<${group}>[^/]+)`;
    })
    .join('');
  return new RegExp(`^${source}$`);
}

/** Every file under a folder, as paths from it, sorted. */
export function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .sort();
}

/**
 * What is wrong with a page's tree against the files the code wrote: a file it does not show, an
 * entry no file matches. `notWritten` are the tree's paths this run cannot show (written by
 * another program, or removed again), each named by the code's own constant: they must be in the
 * tree as written there.
 */
export function layoutProblems(
  file: string,
  name: string,
  written: readonly string[],
  notWritten: readonly string[] = [],
): string[] {
  const entries = layoutFiles(file, name);
  const patterns = entries.map((entry) => ({ entry, pattern: layoutPattern(entry) }));
  const problems: string[] = [];
  for (const path of written)
    if (!patterns.some(({ pattern }) => pattern.test(path)))
      problems.push(`${file}'s "${name}" tree does not show ${path}, which the code writes`);
  for (const { entry, pattern } of patterns)
    if (!notWritten.includes(entry) && !written.some((path) => pattern.test(path)))
      problems.push(`${file}'s "${name}" tree shows ${entry}, which the code did not write`);
  for (const path of notWritten)
    if (!entries.includes(path)) problems.push(`${file}'s "${name}" tree does not show ${path}`);
  return problems;
}
