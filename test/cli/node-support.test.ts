import { describe, expect, it } from 'vitest';
import { oneLineError } from '../../lib/cli/messages.ts';
import { nodeVersionNote, quietSdkNodeWarning, SDK_NODE_WARNING_ENV } from '../../lib/cli/node-support.ts';

describe('the AWS SDK notice about Node versions', () => {
  it('below Node 22: the SDK notice is turned off and one line of the lab goes to stderr, once', () => {
    const env: NodeJS.ProcessEnv = {};
    const written: string[] = [];
    quietSdkNodeWarning(env, 'v20.20.2', (text) => written.push(text));
    quietSdkNodeWarning(env, 'v20.20.2', (text) => written.push(text));
    expect(env[SDK_NODE_WARNING_ENV]).toBe('true');
    expect(written).toEqual([
      'note: Node v20.20.2 is past its end of life; the AWS SDK for JavaScript requires Node >=22 from January 2027. Use Node 22 LTS (README: Node versions).\n',
    ]);
  });

  it('Node 22 and later: no note; a user who turned the notice off gets none either', () => {
    expect(nodeVersionNote('v22.12.0')).toBeUndefined();
    expect(nodeVersionNote('v24.1.0')).toBeUndefined();
    const written: string[] = [];
    quietSdkNodeWarning({ [SDK_NODE_WARNING_ENV]: 'true' }, 'v20.1.0', (text) => written.push(text));
    expect(written).toEqual([]);
  });
});

describe('one-line usage errors', () => {
  it("fold commander's suggestion line into the message and say where the help is", () => {
    expect(oneLineError('lab', "error: unknown command 'stauts'\n(Did you mean status?)\n")).toBe(
      "lab: unknown command 'stauts' (did you mean status?); see lab --help\n",
    );
    expect(
      oneLineError(
        'lab logs',
        "error: unknown option '--fllow'\n(Did you mean one of --follow, --follow-for?)\n",
      ),
    ).toBe(
      "lab logs: unknown option '--fllow' (did you mean one of --follow, --follow-for?); see lab logs --help\n",
    );
    expect(
      oneLineError(
        'lab plan',
        "error: option '--prefixes <n>' argument 'x' is invalid. must be 1 or more.\n",
      ),
    ).toBe(
      "lab plan: option '--prefixes <n>' argument 'x' is invalid. must be 1 or more; see lab plan --help\n",
    );
    expect(oneLineError('lab report', "error: missing required argument 'results-dir'\n")).toBe(
      "lab report: missing required argument 'results-dir'; see lab report --help\n",
    );
  });
});
