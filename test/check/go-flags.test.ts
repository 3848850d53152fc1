import { describe, expect, it } from 'vitest';
import { goBool, mentionsGoFlag, parseGoFlags } from '../../lib/check/go-flags.ts';

describe("the EPP's command line as Go's flag package reads it", () => {
  it('reads -flag and --flag alike, with the value inline or as the next word', () => {
    const flags = parseGoFlags(['/epp', '-pool-name', 'p', '--config-file=/c.yaml', '--v', '-1']);
    expect(Object.fromEntries(flags.values)).toEqual({ 'pool-name': 'p', 'config-file': '/c.yaml', v: '-1' });
    expect(flags.stoppedAt).toBeUndefined();
  });

  it('stops at the positional word after a boolean flag written as two words', () => {
    const flags = parseGoFlags(['--secure-serving', 'false', '--config-file', '/c.yaml']);
    expect(goBool(flags, 'secure-serving', true)).toBe(true);
    expect(flags.values.has('config-file')).toBe(false);
    expect(flags.stoppedAt).toEqual({ word: 'false', index: 1, ignored: ['--config-file', '/c.yaml'] });
  });

  it('reads boolean values the way strconv.ParseBool does, and rejects others', () => {
    expect(goBool(parseGoFlags(['--secure-serving=F']), 'secure-serving', true)).toBe(false);
    expect(goBool(parseGoFlags(['-health-checking']), 'health-checking', false)).toBe(true);
    expect(parseGoFlags(['--secure-serving=no']).error).toBe(
      'invalid boolean value "no" for -secure-serving',
    );
    expect(parseGoFlags(['---x']).error).toBe('bad flag syntax: ---x');
    expect(parseGoFlags(['--pool-name']).error).toBe('flag needs an argument: --pool-name');
  });

  it('finds a flag in either spelling even after parsing stopped', () => {
    expect(mentionsGoFlag(['--secure-serving', 'false', '-pool-name=x'], 'pool-name')).toBe(true);
    expect(mentionsGoFlag(['--pool-namespace', 'x'], 'pool-name')).toBe(false);
  });
});
