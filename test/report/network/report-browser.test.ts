import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { networkStudyFiles } from '../../../lib/report/network/load.ts';
import { writeNetworkReport } from '../../../lib/report/network/write.ts';
import { tempDir } from '../../temp.ts';
import { CHROMIUM, needs } from '../../tools.ts';
import { withChromium } from '../browser.ts';
import { fixtureNetworkStudies, NETWORK_SECTIONS } from './fixture.ts';

/** The DOM's SVGGraphicsElement, as far as this test uses it (the project compiles without DOM types). */
interface SvgGraphics {
  getBBox(): { width: number; height: number };
}

const canRun = needs(CHROMIUM, import.meta.url, 'the Chromium rendering test');

describe('the network report.html in headless Chromium', () => {
  it.runIf(canRun)(
    'renders every table and the four charts, with no console error and nothing fetched',
    async () => {
      const dir = tempDir('lab-net-browser-');
      for (const study of fixtureNetworkStudies()) {
        await mkdir(join(dir, study.cell));
        await writeFile(join(dir, study.cell, 'study.json'), JSON.stringify(study));
      }
      const { html } = await writeNetworkReport(await networkStudyFiles(dir), dir);

      await withChromium(async (context) => {
        const page = await context.newPage();
        const requests: string[] = [];
        const problems: string[] = [];
        page.on('request', (request) => requests.push(request.url()));
        page.on('console', (message) => {
          if (message.type() === 'error' || message.type() === 'warning') problems.push(message.text());
        });
        page.on('pageerror', (error) => problems.push(error.message));
        await page.goto(pathToFileURL(html).href);

        for (const id of NETWORK_SECTIONS) {
          const rows = await page.locator(`section#${id} table tbody tr`).count();
          expect(rows, `section ${id}`).toBeGreaterThan(0);
        }
        expect(await page.locator('section#mtls-matrix tbody tr').count()).toBe(8);
        expect(await page.locator('section#invalid tbody tr').count()).toBe(5);
        const finding = await page
          .locator('section#mtls-matrix tbody tr', { hasText: 'FINDING' })
          .allTextContents();
        expect(finding).toHaveLength(1);
        expect(finding[0]).toContain('connection dropped (HTTP 000, curl exit 56)');

        expect(await page.locator('figure.chart svg').count()).toBe(4);
        // Repeats as points (39 valid fixed-rate repeats of E1, E3, E4), one tick (a Vega rect) per arm.
        const arms = page.locator('#chart-mesh-arm-latency svg');
        expect(await arms.locator('g.mark-symbol.role-mark path').count()).toBe(39);
        expect(await arms.locator('g.mark-rect.role-mark path').count()).toBe(8);
        // Three stacked parts of one cell's bar, each with a real width.
        const parts = page.locator('#chart-attribution svg g.mark-rect.role-mark path');
        const widths = await parts.evaluateAll((paths) =>
          paths.map((p) => (p as unknown as SvgGraphics).getBBox().width),
        );
        expect(widths).toHaveLength(3);
        expect(widths.every((w) => w > 20)).toBe(true);
        // 0.270 : 0.210 : 0.140 ms.
        expect(widths[0] / widths[2]).toBeCloseTo(0.27 / 0.14, 1);
        for (const id of ['programming-latency', 'entries']) {
          const svg = page.locator(`#chart-${id} svg`);
          // One line per cell, 14 valid steps as points (the clustered Cilium step left out).
          expect(await svg.locator('g.mark-line.role-mark path').count()).toBe(3);
          expect(await svg.locator('g.mark-symbol.role-mark path').count()).toBe(14);
          const box = await svg.boundingBox();
          expect(box?.width).toBeGreaterThan(300);
          expect(box?.height).toBeGreaterThan(200);
          const titles = await svg.locator('g.role-axis-title text').allTextContents();
          expect(titles).toContain('Services (symlog scale)');
        }

        expect(problems).toEqual([]);
        expect(requests).toEqual([pathToFileURL(html).href]);
      });
    },
  );
});
