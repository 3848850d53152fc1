import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { writeReport } from '../../lib/report/write.ts';
import { tempDir } from '../temp.ts';
import { CHROMIUM, needs } from '../tools.ts';
import { withChromium } from './browser.ts';
import { fixtureStudy } from './fixture.ts';

const VALID_ARMS = 8;

/** The DOM's SVGGraphicsElement, as far as this test uses it (the project compiles without DOM types). */
interface SvgGraphics {
  getBBox(): { width: number; height: number };
}
const canRun = needs(CHROMIUM, import.meta.url, 'the Chromium rendering test');

describe('report.html in headless Chromium', () => {
  it.runIf(canRun)(
    'renders the three charts with one bar per valid arm, reference rules and axis titles',
    async () => {
      const dir = tempDir('lab-report-browser-');
      await writeFile(join(dir, 'study.json'), JSON.stringify(fixtureStudy()));
      const { html } = await writeReport(dir);

      await withChromium(async (context) => {
        const page = await context.newPage();
        const requests: string[] = [];
        page.on('request', (request) => requests.push(request.url()));
        await page.goto(pathToFileURL(html).href);

        expect(await page.locator('figure.chart svg').count()).toBe(3);
        const charts = [
          { id: 'hit-rate', axis: 'Hit rate (hits / queried tokens, all replicas)', rules: 2 },
          { id: 'p99-ttft', axis: 'p99 TTFT (ms)', rules: 1 },
          { id: 'throughput', axis: 'Total tokens per second', rules: 1 },
        ];
        for (const chart of charts) {
          const svg = page.locator(`#chart-${chart.id} svg`);
          expect(await svg.locator('g.mark-rect.role-mark path').count()).toBe(VALID_ARMS);
          expect(await svg.locator('g.mark-rule.role-mark line').count()).toBe(chart.rules);
          const titles = await svg.locator('g.role-axis-title text').allTextContents();
          expect(titles.sort()).toEqual(['Arm', chart.axis].sort());
          // Laid out by the browser: the chart has a real size and each bar a real width.
          const box = await svg.boundingBox();
          expect(box?.width).toBeGreaterThan(300);
          expect(box?.height).toBeGreaterThan(150);
          const barWidths = await svg
            .locator('g.mark-rect.role-mark path')
            .evaluateAll((paths) => paths.map((p) => (p as unknown as SvgGraphics).getBBox().width));
          expect(barWidths.every((w) => w > 10)).toBe(true);
        }
        // Hit-rate bars are ordered as the arms; the EPP over completions (73.7%) is longer than
        // kube-proxy (42.0%), and its prompt-blind chat arm (42.9%) is not.
        const widths = await page
          .locator('#chart-hit-rate g.mark-rect.role-mark path')
          .evaluateAll((paths) => paths.map((p) => (p as unknown as SvgGraphics).getBBox().width));
        expect(widths[7] / widths[0]).toBeCloseTo(0.737 / 0.42, 1);
        expect(widths[6] / widths[0]).toBeCloseTo(0.429 / 0.42, 1);

        const invalid = await page.locator('section#invalid tbody tr').allTextContents();
        expect(invalid).toHaveLength(2);
        expect(invalid.every((row) => row.includes('invalid'))).toBe(true);
        // Self-contained: the page asked for nothing but itself.
        expect(requests).toEqual([pathToFileURL(html).href]);
      });
    },
  );
});
