import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll } from 'vitest';
import { CHROMIUM_PATH } from '../tools.ts';

/**
 * The features playwright-core 1.65.1 disables in every Chromium it launches: its own
 * `--disable-features` argument, in its order (docs/facts.md §7 point 9). Chromium keeps only the
 * last `--disable-features` of a command line, so `launch` replaces Playwright's argument with one
 * that holds these and the lab's, and checks that the browser got exactly that one.
 */
const PLAYWRIGHT_DISABLED_FEATURES = [
  'AvoidUnnecessaryBeforeUnloadCheckSync',
  'DestroyProfileOnBrowserClose',
  'HttpsUpgrades',
  'HttpsFirstBalancedModeAutoEnable',
  'LensOverlay',
  'MediaRouter',
  'PaintHolding',
  'ThirdPartyStoragePartitioning',
  'AvoidCorsURLLoaderRestartOnRedirect',
  'TcpPortRandomizationWin',
  'OptimizationHints',
  'NetworkTimeServiceQuerying',
  'AimEnabled',
  'PreconnectToSearch',
  'msForceBrowserSignIn',
  'msEdgeUpdateLaunchServicesPreferredVersion',
];

/**
 * Chromium 156's omnibox popups as WebUI pages (chrome://omnibox-popup.top-chrome/): a browser
 * window preloads both in a renderer of their own, about 2 s of CPU per launch on this VM; no
 * test types into the omnibox (docs/facts.md §7 point 9).
 */
const LAB_DISABLED_FEATURES = ['WebUIOmniboxPopup', 'WebUIOmniboxAimPopup'];

const PLAYWRIGHT_FEATURES_ARG = `--disable-features=${PLAYWRIGHT_DISABLED_FEATURES.join(',')}`;
const FEATURES_ARG = `--disable-features=${[...PLAYWRIGHT_DISABLED_FEATURES, ...LAB_DISABLED_FEATURES].join(',')}`;

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  FEATURES_ARG,
];

/** The viewport a page of these browsers starts with: a laptop screen. */
export const DEFAULT_VIEWPORT = { width: 1280, height: 900 };

/**
 * The `--disable-features` arguments of the browser process started on `userDataDir`, read from
 * /proc (its children carry `--type=`). Empty when no such process is found.
 */
function browserFeatureArgs(userDataDir: string): string[][] {
  const found: string[][] = [];
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // ended meanwhile
    }
    if (!argv.includes(`--user-data-dir=${userDataDir}`) || argv.some((a) => a.startsWith('--type=')))
      continue;
    found.push(argv.filter((a) => a.startsWith('--disable-features=')));
  }
  return found;
}

/**
 * Fails unless the browser got one `--disable-features`, the lab's: a playwright-core whose own
 * list differs from PLAYWRIGHT_DISABLED_FEATURES adds its argument again, and Chromium would
 * then keep only one of the two.
 */
function checkFeatureArgs(userDataDir: string): void {
  // Linux only (Debian's Chromium, test/tools.ts); elsewhere the launch goes unchecked.
  if (!existsSync('/proc/self/cmdline')) return;
  const browsers = browserFeatureArgs(userDataDir);
  if (browsers.length !== 1)
    throw new Error(`expected one Chromium browser process on ${userDataDir}, found ${browsers.length}`);
  const [args] = browsers;
  if (args.length !== 1 || args[0] !== FEATURES_ARG)
    throw new Error(
      `Chromium was started with ${args.length} --disable-features arguments (${args.join(' ')}), expected ` +
        `only ${FEATURES_ARG}: playwright-core's own list changed; copy its disabledFeatures ` +
        '(chromiumSwitches.ts) into PLAYWRIGHT_DISABLED_FEATURES in test/report/browser.ts',
    );
}

/** Headless Chromium on a fresh user-data dir; `close` ends it and removes the dir. */
async function launch(viewport: { width: number; height: number }) {
  const userDataDir = await mkdtemp(join(tmpdir(), 'lab-report-chromium-'));
  try {
    const context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: ARGS,
      ignoreDefaultArgs: [PLAYWRIGHT_FEATURES_ARG],
      viewport,
    });
    const close = async () => {
      try {
        await context.close();
      } finally {
        await rm(userDataDir, { recursive: true, force: true });
      }
    };
    try {
      checkFeatureArgs(userDataDir);
    } catch (error) {
      await close();
      throw error;
    }
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

/** A page with a document loaded, and what it did while loading and since. */
export interface LoadedPage {
  readonly page: Page;
  /** Every URL the page requested, in order. */
  readonly requests: readonly string[];
  /** Console errors and warnings, and uncaught exceptions. */
  readonly problems: readonly string[];
}

/** The browser of a file's tests (`chromiumOfFile`). */
export interface FileChromium {
  /** Runs `use` with a new page of the file's browser, closed afterwards. */
  <T>(use: (page: Page) => Promise<T>): Promise<T>;
  /**
   * `url` loaded once for the file, in a page of its own at the default viewport (1280 x 900),
   * for tests that only read it; a test that resizes it sets the default size back. The page is
   * closed with the browser.
   */
  loaded(url: string): Promise<LoadedPage>;
}

/**
 * One headless Chromium for the tests of a file (a launch costs a few seconds of CPU): call at the
 * file's top; the browser is launched on first use, and closed and its dir removed after the file.
 */
export function chromiumOfFile(): FileChromium {
  let browser: ReturnType<typeof launch> | undefined;
  const loads = new Map<string, Promise<LoadedPage>>();
  afterAll(async () => {
    // A launch that failed has failed its test already.
    if (browser)
      await browser.then(
        (b) => b.close(),
        () => undefined,
      );
  });
  const context = async () => {
    browser ??= launch(DEFAULT_VIEWPORT);
    return (await browser).context;
  };
  const withPage = async <T>(use: (page: Page) => Promise<T>): Promise<T> => {
    const page = await (await context()).newPage();
    try {
      return await use(page);
    } finally {
      await page.close();
    }
  };
  const loaded = (url: string): Promise<LoadedPage> => {
    let load = loads.get(url);
    if (!load) {
      load = (async () => {
        const page = await (await context()).newPage();
        const requests: string[] = [];
        const problems: string[] = [];
        page.on('request', (request) => requests.push(request.url()));
        page.on('console', (message) => {
          if (message.type() === 'error' || message.type() === 'warning') problems.push(message.text());
        });
        page.on('pageerror', (error) => problems.push(error.message));
        await page.goto(url);
        return { page, requests, problems };
      })();
      loads.set(url, load);
    }
    return load;
  };
  return Object.assign(withPage, { loaded });
}
