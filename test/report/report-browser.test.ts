import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { writeReport } from '../../lib/report/write.ts';
import { tempDir } from '../temp.ts';
import { CHROMIUM, needs } from '../tools.ts';
import { chromiumOfFile, DEFAULT_VIEWPORT } from './browser.ts';
import { fixtureStudy } from './fixture.ts';
import { networkReportInChromium } from './network/report-browser.ts';

const VALID_ARMS = 8;

/** The DOM's SVGGraphicsElement, as far as this test uses it (the project compiles without DOM types). */
interface SvgGraphics {
  getBBox(): { width: number; height: number };
}
const canRun = needs(CHROMIUM, import.meta.url, 'the Chromium rendering test');
const withPage = chromiumOfFile();

/** The fixture study's report, written once for the file's tests (they only read it, from one page load). */
let written: Promise<string> | undefined;
function reportHtml(): Promise<string> {
  written ??= (async () => {
    const dir = tempDir('lab-report-browser-');
    await writeFile(join(dir, 'study.json'), JSON.stringify(fixtureStudy()));
    return (await writeReport(dir)).html;
  })();
  return written;
}

describe('report.html in headless Chromium', () => {
  it.runIf(canRun)(
    'renders the three charts with one bar per valid arm, reference rules and axis titles',
    async () => {
      const html = await reportHtml();
      const { page, requests, problems } = await withPage.loaded(pathToFileURL(html).href);

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
      expect(problems).toEqual([]);
    },
  );

  it.skipIf(!canRun)(
    'fits a 1400 px window and a 1280 px laptop screen: no table clipped, no axis title on a label',
    async () => {
      const html = await reportHtml();
      const { page } = await withPage.loaded(pathToFileURL(html).href);
      // No script: the report is HTML, CSS and inline SVG, so a resized page is laid out as a page
      // loaded at that width would be (one load read at both widths).
      expect(await page.locator('script').count()).toBe(0);
      try {
        for (const width of [1400, DEFAULT_VIEWPORT.width]) {
          await page.setViewportSize({ width, height: DEFAULT_VIEWPORT.height });
          const layout = await page.evaluate(() => {
            // Browser globals, typed loosely: the project compiles without DOM types.
            const doc = (globalThis as unknown as { document: BrowserDocument }).document;
            const tables = [...doc.querySelectorAll('table')].map((table) => ({
              section: table.closest('section')?.id ?? '',
              width: table.getBoundingClientRect().width,
              room: table.parentElement?.getBoundingClientRect().width ?? 0,
            }));
            return { page: doc.documentElement.scrollWidth, tables };
          });
          expect(layout.page, `page at ${width} px`).toBeLessThanOrEqual(width);
          expect(layout.tables.length).toBeGreaterThan(5);
          for (const table of layout.tables)
            expect(table.width, `${table.section} at ${width} px`).toBeLessThanOrEqual(table.room + 0.5);

          for (const id of ['hit-rate', 'p99-ttft', 'throughput']) {
            const axis = page.locator(`#chart-${id} g.role-axis`).filter({ hasText: 'Arm' });
            const title = await axis.locator('g.role-axis-title text').boundingBox();
            const labels = await axis.locator('g.role-axis-label text').evaluateAll((texts) =>
              texts.map((text) => {
                const box = (text as unknown as BrowserElement).getBoundingClientRect();
                return { x: box.x, y: box.y, width: box.width, height: box.height };
              }),
            );
            expect(title).not.toBeNull();
            expect(labels.length).toBe(VALID_ARMS + 1);
            const apart = (a: Box, b: Box) =>
              a.x + a.width + 2 <= b.x ||
              b.x + b.width + 2 <= a.x ||
              a.y + a.height + 2 <= b.y ||
              b.y + b.height + 2 <= a.y;
            for (const label of labels)
              expect(apart(title as Box, label), `${id}: axis title on a label at ${width} px`).toBe(true);
          }
        }
      } finally {
        await page.setViewportSize(DEFAULT_VIEWPORT);
      }
    },
  );
});

// The network report's tests, in this file to share its Chromium.
networkReportInChromium(withPage, canRun);

interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}
interface BrowserElement {
  getBoundingClientRect(): Box;
  closest(selector: string): { id: string } | null;
  parentElement: BrowserElement | null;
}
interface BrowserDocument {
  querySelectorAll(selector: string): Iterable<BrowserElement>;
  documentElement: { scrollWidth: number };
}
