import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { citeFacts, citesOldSpec, isCommentLine, rewritten, sourceFiles } from '../../scripts/cite-facts.ts';
import { documentationFiles, REPO_ROOT } from '../../scripts/examples.ts';

const read = (file: string) => readFileSync(join(REPO_ROOT, file), 'utf8');

/** Section numbers of docs/facts.md: "2.1", "3.4", "N7", ... */
function factSections(): Set<string> {
  const headings = read('docs/facts.md').matchAll(/^#{2,3} (N?\d+(?:\.\d+)?)\.? /gm);
  return new Set([...headings].map((match) => match[1] ?? ''));
}

describe('docs/facts.md is what code comments cite', () => {
  const files = sourceFiles().filter((file) => file !== 'scripts/cite-facts.ts');

  it('no comment cites the specification outside the repository (run npx tsx scripts/cite-facts.ts)', () => {
    const stale = files.flatMap((file) =>
      read(file)
        .split('\n')
        .map((line, i) => ({ line, at: `${file}:${i + 1}` }))
        .filter(({ line }) => isCommentLine(line, file) && citesOldSpec(line))
        .map(({ at, line }) => `${at}: ${line.trim()}`),
    );
    expect(stale).toEqual([]);
  });

  it('every section a comment or a docs page cites exists in docs/facts.md', () => {
    const sections = factSections();
    expect(sections).toContain('4.1');
    expect(sections).toContain('N7');
    const cited = [...files, ...documentationFiles()].flatMap((file) =>
      [...read(file).matchAll(/facts\.md §(N?\d+(?:\.\d+)?)/g)].map((match) => ({
        file,
        section: match[1] ?? '',
      })),
    );
    expect(cited.length).toBeGreaterThan(100);
    expect(cited.filter(({ section }) => !sections.has(section))).toEqual([]);
  });

  it('no docs page cites the old names in its prose', () => {
    const stale = documentationFiles()
      .filter((file) => file !== 'docs/facts.md')
      .filter((file) => rewritten(read(file), file) !== read(file));
    expect(stale).toEqual([]);
  });
});

describe('citeFacts', () => {
  it('rewrites lab-spec and network-lab-spec citations to sections of docs/facts.md', () => {
    expect(citeFacts(' * (lab-spec 4.2 point 5, then')).toBe(' * (docs/facts.md §4.2, then');
    expect(citeFacts('// lab-spec sections 2-4')).toBe('// docs/facts.md §2-4');
    expect(citeFacts(' * the lessons of lab-spec section 5.')).toBe(' * the lessons of docs/facts.md §5.');
    expect(citeFacts(' * (lab-spec 4.3 and 4.4)')).toBe(' * (docs/facts.md §4.3 and 4.4)');
    expect(citeFacts('# network-lab-spec 7, network-lab-spec 2-4')).toBe(
      '# docs/facts.md §N7, docs/facts.md §N2-N4',
    );
  });

  it('touches comment lines only, and Markdown outside code blocks', () => {
    const source = "// lab-spec 3.1\nconst a = 'lab-spec 3.1';\n";
    expect(rewritten(source, 'x.ts')).toBe("// docs/facts.md §3.1\nconst a = 'lab-spec 3.1';\n");
    expect(rewritten('# lab-spec 2.2\necho lab-spec 2.2', 'x.sh')).toBe(
      '# docs/facts.md §2.2\necho lab-spec 2.2',
    );
    const markdown = 'See lab-spec 4.4.\n```\nNetwork lab plan (network-lab-spec 7)\n```';
    expect(rewritten(markdown, 'x.md')).toBe(
      'See docs/facts.md §4.4.\n```\nNetwork lab plan (network-lab-spec 7)\n```',
    );
  });
});
