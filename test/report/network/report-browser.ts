import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { networkStudyFiles } from '../../../lib/report/network/load.ts';
import { writeNetworkReport } from '../../../lib/report/network/write.ts';
import { tempDir } from '../../temp.ts';
import { DEFAULT_VIEWPORT, type FileChromium } from '../browser.ts';
import { fixtureNetworkStudies, NETWORK_SECTIONS } from './fixture.ts';

/** The DOM's SVGGraphicsElement, as far as this test uses it (the project compiles without DOM types). */
interface SvgGraphics {
  getBBox(): { width: number; height: number };
}

/**
 * The network report's rendering tests, registered by test/report/report-browser.test.ts: the two
 * reports' tests share that file's one Chromium (a launch costs a few seconds of CPU).
 */
export function networkReportInChromium(withPage: FileChromium, canRun: boolean): void {
  /** The fixture cells' report, written once for these tests (they only read it, from one page load). */
  let written: Promise<string> | undefined;
  function reportHtml(): Promise<string> {
    written ??= (async () => {
      const dir = tempDir('lab-net-browser-');
      for (const study of fixtureNetworkStudies()) {
        await mkdir(join(dir, study.cell));
        await writeFile(join(dir, study.cell, 'study.json'), JSON.stringify(study));
      }
      return (await writeNetworkReport(await networkStudyFiles(dir), dir)).html;
    })();
    return written;
  }

  describe('the network report.html in headless Chromium', () => {
    it.runIf(canRun)(
      'renders every table and the four charts, with no console error and nothing fetched',
      async () => {
        const html = await reportHtml();
        const { page, requests, problems } = await withPage.loaded(pathToFileURL(html).href);

        for (const id of NETWORK_SECTIONS) {
          const rows = await page.locator(`section#${id} table tbody tr`).count();
          expect(rows, `section ${id}`).toBeGreaterThan(0);
        }
        expect(await page.locator('section#mtls-matrix tbody tr').count()).toBe(9);
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
          // One line per cell, Cilium's in two pieces around its invalid 5,000-Service step (no
          // line across it); 14 valid steps as points.
          expect(await svg.locator('g.mark-line.role-mark path').count()).toBe(4);
          expect(await svg.locator('g.mark-symbol.role-mark path').count()).toBe(14);
          const box = await svg.boundingBox();
          expect(box?.width).toBeGreaterThan(300);
          expect(box?.height).toBeGreaterThan(200);
          const titles = await svg.locator('g.role-axis-title text').allTextContents();
          expect(titles).toContain('Services (symlog scale)');
        }

        // The headline first, as a list of five answers.
        expect(await page.locator('section').first().getAttribute('id')).toBe('headline');
        expect(await page.locator('section#headline li').count()).toBe(5);
        // Notes neutral, warnings in their own colour and marked in words.
        const colour = (selector: string) =>
          page
            .locator(selector)
            .first()
            .evaluate((el) => {
              const g = globalThis as unknown as { getComputedStyle(e: unknown): { color: string } };
              return g.getComputedStyle(el).color;
            });
        const note = await colour('section#attribution p.note');
        const warning = await colour('section#grpc p.warning');
        expect(note).toBe('rgb(77, 77, 77)');
        expect(warning).toBe('rgb(154, 68, 0)');
        expect(await page.locator('section#grpc p.warning').first().textContent()).toMatch(
          /^Warning: Left out as invalid/,
        );

        expect(problems).toEqual([]);
        expect(requests).toEqual([pathToFileURL(html).href]);
      },
    );

    it.runIf(canRun)(
      'fits a 1400 px window and a 1280 px laptop screen: no table wider than its room',
      async () => {
        const html = await reportHtml();
        const { page } = await withPage.loaded(pathToFileURL(html).href);
        // No script: a resized page is laid out as one loaded at that width (one load, two widths).
        expect(await page.locator('script').count()).toBe(0);
        try {
          for (const width of [1400, DEFAULT_VIEWPORT.width]) {
            await page.setViewportSize({ width, height: DEFAULT_VIEWPORT.height });
            const layout = await page.evaluate(() => {
              // Browser globals, typed loosely: the project compiles without DOM types.
              interface Box {
                width: number;
              }
              interface El {
                closest(s: string): { id: string } | null;
                getBoundingClientRect(): Box;
                parentElement: { getBoundingClientRect(): Box } | null;
              }
              const doc = (
                globalThis as unknown as {
                  document: { querySelectorAll(s: string): El[]; documentElement: { scrollWidth: number } };
                }
              ).document;
              return {
                page: doc.documentElement.scrollWidth,
                tables: [...doc.querySelectorAll('table')].map((t) => ({
                  section: t.closest('section')?.id ?? '',
                  width: t.getBoundingClientRect().width,
                  room: t.parentElement?.getBoundingClientRect().width ?? 0,
                })),
              };
            });
            expect(layout.page, `page at ${width} px`).toBeLessThanOrEqual(width);
            expect(layout.tables.length).toBeGreaterThan(10);
            for (const t of layout.tables)
              expect(t.width, `${t.section} at ${width} px`).toBeLessThanOrEqual(t.room + 0.5);
          }
        } finally {
          await page.setViewportSize(DEFAULT_VIEWPORT);
        }
      },
    );
  });
}
