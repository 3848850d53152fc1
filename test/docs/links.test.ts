import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { documentationFiles, REPO_ROOT } from '../../scripts/examples.ts';

/** GitHub's anchors of a Markdown page's headings (lower case, punctuation dropped, spaces to -). */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6} (.*)$/.exec(line);
    if (!heading) continue;
    const slug = (heading[1] ?? '')
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_\- ]/gu, '')
      .replaceAll(' ', '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    found.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return found;
}

describe('links in README.md and docs/', () => {
  it('point at files that exist and at headings those pages have', () => {
    const broken: string[] = [];
    for (const file of documentationFiles()) {
      const text = readFileSync(join(REPO_ROOT, file), 'utf8');
      for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const link = match[1] ?? '';
        if (/^[a-z]+:/.test(link)) continue;
        const [path = '', anchor] = link.split('#');
        const target = path === '' ? file : normalize(join(dirname(file), path));
        if (!existsSync(join(REPO_ROOT, target))) broken.push(`${file}: ${link} (no such file)`);
        else if (
          anchor &&
          target.endsWith('.md') &&
          !anchors(readFileSync(join(REPO_ROOT, target), 'utf8')).has(anchor)
        )
          broken.push(`${file}: ${link} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('docs/README.md lists every page of docs/', () => {
    const contents = readFileSync(join(REPO_ROOT, 'docs/README.md'), 'utf8');
    const unlisted = documentationFiles()
      .filter((file) => file.startsWith('docs/') && file !== 'docs/README.md')
      .filter((file) => !contents.includes(`](${file.slice('docs/'.length)})`));
    expect(unlisted).toEqual([]);
  });
});
