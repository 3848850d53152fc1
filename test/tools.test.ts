import { afterEach, describe, expect, it, vi } from 'vitest';
import { CHROMIUM, inCi, needs, type OutsideTool, SHELLCHECK } from './tools.ts';

const missing = (name: string): OutsideTool => ({
  name,
  install: `apt-get install -y ${name}`,
  available: () => false,
});

describe('tests that need an outside tool', () => {
  afterEach(() => vi.restoreAllMocks());

  it('run when the tool is there, without a word', () => {
    const write = vi.spyOn(process.stderr, 'write').mockReturnValue(true);
    const present: OutsideTool = { name: 'present-tool', install: '-', available: () => true };
    expect(needs(present, import.meta.url, 'its tests', {})).toBe(true);
    expect(write).not.toHaveBeenCalled();
  });

  it('are skipped when it is missing, and the file says so in one line', () => {
    const write = vi.spyOn(process.stderr, 'write').mockReturnValue(true);
    expect(needs(missing('missing-tool-a'), import.meta.url, 'the frobnication tests', {})).toBe(false);
    expect(write.mock.calls.map(([text]) => text)).toEqual([
      'test/tools.test.ts: skipping the frobnication tests: missing-tool-a is not installed (apt-get install -y missing-tool-a)\n',
    ]);
  });

  it('fail the file under CI=true instead', () => {
    const write = vi.spyOn(process.stderr, 'write').mockReturnValue(true);
    expect(() => needs(missing('missing-tool-b'), import.meta.url, 'its tests', { CI: 'true' })).toThrow(
      'test/tools.test.ts: missing-tool-b is not installed (apt-get install -y missing-tool-b); under CI every tool the tests need must be present',
    );
    expect(write).not.toHaveBeenCalled();
  });

  it('take CI from the variable most CI systems set', () => {
    expect(inCi({ CI: 'true' })).toBe(true);
    expect(inCi({ CI: '1' })).toBe(true);
    expect(inCi({ CI: 'false' })).toBe(false);
    expect(inCi({ CI: '' })).toBe(false);
    expect(inCi({})).toBe(false);
  });

  it('name the two tools .ci/run installs', () => {
    expect([SHELLCHECK.name, CHROMIUM.name]).toEqual(['shellcheck', 'chromium']);
    expect(SHELLCHECK.install).toBe('apt-get install -y shellcheck');
  });
});
