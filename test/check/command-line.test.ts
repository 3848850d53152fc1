import { describe, expect, it } from 'vitest';
import { flagIsOn, flagValues, shellCommands, shellScript } from '../../lib/check/command-line.ts';

describe('reading container command lines', () => {
  it('splits sh -c scripts into simple commands, honouring quotes and continuations', () => {
    const script = `set -e
pip install 'vllm-router==0.1.15' && \\
  exec vllm-router --worker-urls "http://a:8000" http://b:8000 # two workers
echo done; A=1 B="x y" env`;
    expect(shellCommands(script)).toEqual([
      ['set', '-e'],
      ['pip', 'install', 'vllm-router==0.1.15'],
      ['vllm-router', '--worker-urls', 'http://a:8000', 'http://b:8000'],
      ['echo', 'done'],
      ['env'],
    ]);
  });

  it('finds the script of sh -c, bash -lc and /bin/sh -ec', () => {
    expect(shellScript(['sh', '-c', 'x'])).toEqual({ script: 'x', index: 2 });
    expect(shellScript(['/bin/bash', '-lc', 'y'])).toEqual({ script: 'y', index: 2 });
    expect(shellScript(['/bin/sh', '-ec', 'z'])).toEqual({ script: 'z', index: 2 });
    expect(shellScript(['vllm', 'serve'])).toBeUndefined();
  });

  it('reads flags in both spellings and multi-valued lists', () => {
    const words = ['--worker-urls', 'a', 'b', '--policy=cache_aware', '--secure-serving=false', '--flag'];
    expect(flagValues(words, '--worker-urls')).toEqual(['a', 'b']);
    expect(flagValues(words, '--policy')).toEqual(['cache_aware']);
    expect(flagValues(words, '--missing')).toBeUndefined();
    expect(flagIsOn(words, '--secure-serving')).toBe(false);
    expect(flagIsOn(words, '--flag')).toBe(true);
  });
});
