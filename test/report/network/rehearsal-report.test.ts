import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadNetworkStudies, networkStudyFiles } from '../../../lib/report/network/load.ts';
import { networkReportTables } from '../../../lib/report/network/tables.ts';
import { writeNetworkReport } from '../../../lib/report/network/write.ts';
import { REHEARSAL_BROKEN, rehearseNetworkStudy } from '../../runner/network/rehearsal.ts';
import { tempDir } from '../../temp.ts';
import { CHROMIUM, needs } from '../../tools.ts';
import { withChromium } from '../browser.ts';
import { NETWORK_SECTIONS } from './fixture.ts';

const canRun = needs(CHROMIUM, import.meta.url, 'the Chromium part of the rehearsal test');

/**
 * The Done-when: the whole default network study rehearsed against fake cells
 * (test/runner/network/rehearsal.ts), its study folders read back from disk, and its report:
 * exactly the rehearsal's broken runs invalid, every table and chart rendered in Chromium.
 */
describe('the report of the rehearsed default network study', () => {
  it('reads every cell from its results folder, marks exactly the broken runs invalid and renders in Chromium', async () => {
    const cells = await rehearseNetworkStudy();
    const files = (await Promise.all(cells.map((cell) => networkStudyFiles(cell.resultsDir)))).flat();
    expect(files).toEqual(cells.map((cell) => join(cell.studyDir, 'study.json')));

    const tables = networkReportTables(await loadNetworkStudies(files));
    expect(tables.invalid.map((r) => `${r.cell}/${r.runId}`).sort()).toEqual(
      Object.values(REHEARSAL_BROKEN)
        .map((b) => `${b.cell}/${b.runId}`)
        .sort(),
    );
    expect(tables.invalid.every((r) => r.reasons.length > 0)).toBe(true);
    expect(tables.cells.map((c) => c.state)).toEqual(cells.map(() => 'finished'));
    expect(tables.attribution.every((a) => a.available)).toBe(true);
    expect(tables.mtls.length).toBeGreaterThan(0);
    expect(tables.scale.length).toBeGreaterThan(0);
    expect(tables.conntrack.length).toBeGreaterThan(0);

    const out = tempDir('lab-net-rehearsal-report-');
    const { html, banner } = await writeNetworkReport(files, out);
    expect(banner).toBeUndefined();
    if (!canRun) return;
    await withChromium(async (context) => {
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('console', (message) => {
        if (message.type() === 'error' || message.type() === 'warning') problems.push(message.text());
      });
      page.on('pageerror', (error) => problems.push(error.message));
      await page.goto(pathToFileURL(html).href);
      // Every table but Flagged runs: the rehearsal flags no run.
      for (const id of NETWORK_SECTIONS.filter((section) => section !== 'flagged')) {
        expect(await page.locator(`section#${id} table tbody tr`).count(), `section ${id}`).toBeGreaterThan(
          0,
        );
      }
      expect(await page.locator('section#invalid tbody tr').count()).toBe(
        Object.keys(REHEARSAL_BROKEN).length,
      );
      expect(await page.locator('figure.chart svg').count()).toBe(4);
      expect(problems).toEqual([]);
    });
  });
});
