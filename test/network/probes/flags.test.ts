import { describe, expect, it } from 'vitest';
import { envName, type FlagSpecs, parseFlags, parseHostPort } from '../../../lib/network/probes/flags.ts';

const SPECS = {
  url: { kind: 'string', description: 'http:// URL of the stream' },
  events: { kind: 'int', min: 1, max: 1000, default: 200, description: 'events per stream' },
  ratio: { kind: 'number', min: 0, default: 0.5, description: 'a ratio' },
  target: { kind: 'strings', description: 'host:port' },
} satisfies FlagSpecs;

describe('probe flags', () => {
  it('reads --name value and --name=value, keeps defaults, collects repeated lists', () => {
    const flags = parseFlags(
      SPECS,
      ['--url', 'http://a/events', '--events=50', '--target', 'a:1', '--target', 'b:2'],
      {},
    );
    expect(flags).toEqual({ url: 'http://a/events', events: 50, ratio: 0.5, target: ['a:1', 'b:2'] });
  });

  it('falls back to PROBE_<NAME> in the environment; the command line wins', () => {
    expect(envName('interval-ms')).toBe('PROBE_INTERVAL_MS');
    const env = { PROBE_URL: 'http://env/events', PROBE_EVENTS: '7', PROBE_TARGET: 'a:1,b:2' };
    expect(parseFlags(SPECS, [], env)).toEqual({
      url: 'http://env/events',
      events: 7,
      ratio: 0.5,
      target: ['a:1', 'b:2'],
    });
    expect(parseFlags(SPECS, ['--events', '9'], env).events).toBe(9);
  });

  it('names the flag, the bad value and what is allowed', () => {
    const url = ['--url', 'u'];
    expect(() => parseFlags(SPECS, [...url, '--events', '0'], {})).toThrow(
      "--events must be an integer from 1 to 1000, got '0'",
    );
    expect(() => parseFlags(SPECS, [...url, '--events', '2.5'], {})).toThrow(
      "--events must be an integer from 1 to 1000, got '2.5'",
    );
    expect(() => parseFlags(SPECS, [...url, '--ratio', 'x'], {})).toThrow(
      "--ratio must be a number >= 0, got 'x'",
    );
    expect(() => parseFlags(SPECS, [], {})).toThrow(
      '--url is required (http:// URL of the stream; or set PROBE_URL)',
    );
    expect(() => parseFlags(SPECS, [...url, '--evnets', '3'], {})).toThrow(
      'unknown flag --evnets; allowed: --url, --events, --ratio, --target',
    );
    expect(() => parseFlags(SPECS, ['--url'], {})).toThrow('--url needs a value');
    expect(() => parseFlags(SPECS, [...url, 'stray'], {})).toThrow("unexpected argument 'stray'");
    expect(() => parseFlags(SPECS, [...url, '--events', '1', '--events', '2'], {})).toThrow(
      '--events was given 2 times; give it once',
    );
  });

  it('parses host:port, IPv6 in brackets', () => {
    expect(parseHostPort('target', '10.43.0.12:80')).toEqual({ host: '10.43.0.12', port: 80 });
    expect(parseHostPort('target', '[::1]:8080')).toEqual({ host: '::1', port: 8080 });
    expect(() => parseHostPort('target', 'svc:99999')).toThrow(
      "--target must be host:port with a port from 1 to 65535, got 'svc:99999'",
    );
    expect(() => parseHostPort('target', 'svc')).toThrow("got 'svc'");
  });
});
