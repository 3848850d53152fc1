/**
 * Writes docs/report-example.png: the report of the test fixture's default study (two invalid runs
 * included), rendered by the real `writeReport` and photographed in headless Chromium from the top of
 * the page down to the end of the charts.
 *
 * Run: npx tsx scripts/report-example.ts   (needs /usr/bin/chromium)
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { writeReport } from '../lib/report/write.ts';
import { launchChromium } from '../test/report/browser.ts';
import { fixtureStudy } from '../test/report/fixture.ts';

const output = fileURLToPath(new URL('../docs/report-example.png', import.meta.url));

const resultsDir = await mkdtemp(join(tmpdir(), 'lab-report-example-'));
await writeFile(join(resultsDir, 'study.json'), `${JSON.stringify(fixtureStudy(), null, 2)}\n`);
const written = await writeReport(resultsDir);

const context = await launchChromium({ width: 1280, height: 900 });
try {
  const page = await context.newPage();
  await page.goto(pathToFileURL(written.html).href);
  const charts = await page.locator('#charts').boundingBox();
  if (!charts) throw new Error('the report has no charts section');
  await page.screenshot({
    path: output,
    fullPage: true,
    clip: { x: 0, y: 0, width: 1280, height: Math.ceil(charts.y + charts.height + 16) },
  });
} finally {
  await context.close();
}
process.stdout.write(`wrote ${output} from ${written.html}\n`);
