import { mkdtempSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isSameCopy } from '../../lib/control/cluster-study.ts';

describe("lab results' unchanged check", () => {
  it('takes a copy whose time utimes put a millisecond below the claim’s as unchanged', () => {
    // Measured on Node 20.20.2: a claim time with a fraction near 1 comes back this far below.
    expect(
      isSameCopy({ size: 105, mtimeMs: 1796232806026.999 }, { size: 105, mtimeMs: 1796232806027.9998 }),
    ).toBe(true);
    // And the copy made here, from such a time, whatever this Node and file system do with it.
    const file = join(mkdtempSync(join(tmpdir(), 'lab-same-copy-')), 'f.log');
    writeFileSync(file, 'x'.repeat(105));
    const claim = { size: 105, mtimeMs: 1796232806027.9998 };
    utimesSync(file, new Date(claim.mtimeMs), new Date(claim.mtimeMs));
    expect(isSameCopy(statSync(file), claim)).toBe(true);
  });

  it('fetches again a file whose size or time differs', () => {
    const claim = { size: 105, mtimeMs: 1796232806027.5 };
    expect(isSameCopy(undefined, claim)).toBe(false);
    expect(isSameCopy({ size: 104, mtimeMs: claim.mtimeMs }, claim)).toBe(false);
    expect(isSameCopy({ size: 105, mtimeMs: claim.mtimeMs - 5 }, claim)).toBe(false);
    expect(isSameCopy({ size: 105, mtimeMs: claim.mtimeMs + 5 }, claim)).toBe(false);
  });
});
