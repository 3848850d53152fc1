import { existsSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';

/** Debian's chromium, installed by `.ci/run` (and by hand: `apt-get install -y chromium`). */
export const CHROMIUM_PATH = '/usr/bin/chromium';

export const chromiumInstalled = (): boolean => existsSync(CHROMIUM_PATH);

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Headless Chromium with a fresh user-data dir; close the context to end it. */
export async function launchChromium(viewport = { width: 1280, height: 900 }): Promise<BrowserContext> {
  const userDataDir = await mkdtemp(join(tmpdir(), 'lab-report-chromium-'));
  return chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: ARGS,
    viewport,
  });
}
