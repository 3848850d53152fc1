/**
 * Renders the report of the test fixture's default study (two invalid runs included) with the real
 * `writeReport` and photographs it in headless Chromium from the top of the page down to the end of
 * the charts. With `--write` the picture replaces the tracked docs/report-example.png; without it,
 * it goes to a temporary folder whose path is printed, and the tracked file is left as it is.
 *
 * Run: npx tsx scripts/report-example.ts [--write]   (needs /usr/bin/chromium)
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { writeReport } from '../lib/report/write.ts';
import { withChromium } from '../test/report/browser.ts';
import { fixtureStudy } from '../test/report/fixture.ts';

const TRACKED = fileURLToPath(new URL('../docs/report-example.png', import.meta.url));
const write = process.argv.includes('--write');

const resultsDir = await mkdtemp(join(tmpdir(), 'lab-report-example-'));
const output = write ? TRACKED : join(resultsDir, 'report-example.png');
try {
  await writeFile(join(resultsDir, 'study.json'), `${JSON.stringify(fixtureStudy(), null, 2)}\n`);
  const written = await writeReport(resultsDir);
  await withChromium(async (context) => {
    const page = await context.newPage();
    await page.goto(pathToFileURL(written.html).href);
    const charts = await page.locator('#charts').boundingBox();
    if (!charts) throw new Error('the report has no charts section');
    await page.screenshot({
      path: output,
      fullPage: true,
      clip: { x: 0, y: 0, width: 1280, height: Math.ceil(charts.y + charts.height + 16) },
    });
  });
} finally {
  // The folder is kept only when it holds the picture the user asked to look at.
  if (write) await rm(resultsDir, { recursive: true, force: true });
}
process.stdout.write(
  write
    ? `wrote ${output}\n`
    : `wrote ${output} (with its report beside it; remove the folder when done). ${TRACKED} is unchanged: pass --write to replace it.\n`,
);
