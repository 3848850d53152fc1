import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** A program outside node_modules that some tests run: `.ci/run` installs each of them. */
export interface OutsideTool {
  readonly name: string;
  /** How to install it on Debian, for the message. */
  readonly install: string;
  readonly available: () => boolean;
}

export const SHELLCHECK: OutsideTool = {
  name: 'shellcheck',
  install: 'apt-get install -y shellcheck',
  available: () => spawnSync('shellcheck', ['--version']).status === 0,
};

/** Debian's chromium, driven by playwright-core (test/report/browser.ts). */
export const CHROMIUM_PATH = '/usr/bin/chromium';

export const CHROMIUM: OutsideTool = {
  name: 'chromium',
  install: 'apt-get install -y chromium',
  available: () => existsSync(CHROMIUM_PATH),
};

/** CI=true (or any value but false/0): GitHub Actions, GitLab and most CI systems set it. */
export function inCi(env: NodeJS.ProcessEnv = process.env): boolean {
  const value = (env.CI ?? '').trim().toLowerCase();
  return value !== '' && value !== 'false' && value !== '0';
}

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const known = new Map<string, boolean>();

/**
 * Whether the tests of a file that need `tool` can run. When it is missing, the file says so in one
 * line on stderr and those tests are skipped (pass the result to `it.runIf`); under CI a missing
 * tool throws instead, which fails the file and so the run: CI must never pass on skipped checks.
 *
 * @param fileUrl the test file's `import.meta.url`, named in the message
 * @param what what is skipped, e.g. "the shellcheck tests"
 */
export function needs(tool: OutsideTool, fileUrl: string, what: string, env = process.env): boolean {
  let available = known.get(tool.name);
  if (available === undefined) {
    available = tool.available();
    known.set(tool.name, available);
  }
  if (available) return true;
  const file = relative(ROOT, fileURLToPath(fileUrl));
  const missing = `${tool.name} is not installed (${tool.install})`;
  if (inCi(env)) throw new Error(`${file}: ${missing}; under CI every tool the tests need must be present`);
  process.stderr.write(`${file}: skipping ${what}: ${missing}\n`);
  return false;
}
