import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';
import { CHROMIUM_PATH } from '../tools.ts';

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

/**
 * Runs `use` with headless Chromium on a fresh user-data dir; the browser is closed and the dir
 * removed afterwards, whatever `use` does.
 */
export async function withChromium<T>(
  use: (context: BrowserContext) => Promise<T>,
  viewport = { width: 1280, height: 900 },
): Promise<T> {
  const userDataDir = await mkdtemp(join(tmpdir(), 'lab-report-chromium-'));
  try {
    const context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: ARGS,
      viewport,
    });
    try {
      return await use(context);
    } finally {
      await context.close();
    }
  } finally {
    await rm(userDataDir, { recursive: true, force: true });
  }
}
