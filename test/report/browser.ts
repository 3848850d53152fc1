import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll } from 'vitest';
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

const DEFAULT_VIEWPORT = { width: 1280, height: 900 };

/** Headless Chromium on a fresh user-data dir; `close` ends it and removes the dir. */
async function launch(viewport: { width: number; height: number }) {
  const userDataDir = await mkdtemp(join(tmpdir(), 'lab-report-chromium-'));
  try {
    const context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: ARGS,
      viewport,
    });
    const close = async () => {
      try {
        await context.close();
      } finally {
        await rm(userDataDir, { recursive: true, force: true });
      }
    };
    return { context, close };
  } catch (error) {
    await rm(userDataDir, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Runs `use` with headless Chromium on a fresh user-data dir; the browser is closed and the dir
 * removed afterwards, whatever `use` does.
 */
export async function withChromium<T>(
  use: (context: BrowserContext) => Promise<T>,
  viewport = DEFAULT_VIEWPORT,
): Promise<T> {
  const browser = await launch(viewport);
  try {
    return await use(browser.context);
  } finally {
    await browser.close();
  }
}

/**
 * One headless Chromium for the tests of a file (a launch costs a few seconds of CPU): call at the
 * file's top; the returned function launches it on first use and each test opens its own page in
 * it, closed after the test. The browser is closed and its dir removed after the file.
 */
export function chromiumOfFile(): <T>(use: (page: Page) => Promise<T>) => Promise<T> {
  let browser: ReturnType<typeof launch> | undefined;
  afterAll(async () => {
    // A launch that failed has failed its test already.
    if (browser)
      await browser.then(
        (b) => b.close(),
        () => undefined,
      );
  });
  return async (use) => {
    browser ??= launch(DEFAULT_VIEWPORT);
    const page = await (await browser).context.newPage();
    try {
      return await use(page);
    } finally {
      await page.close();
    }
  };
}
