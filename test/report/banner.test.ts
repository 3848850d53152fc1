import { describe, expect, it } from 'vitest';
import { studyBanner, studyCompleteness } from '../../lib/report/banner.ts';
import { reportSections } from '../../lib/report/format.ts';
import { htmlReport } from '../../lib/report/html.ts';
import { markdownReport } from '../../lib/report/markdown.ts';
import { reportTables } from '../../lib/report/tables.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import type { StudyRecord } from '../../lib/study/results.ts';
import { fixtureStudy } from './fixture.ts';

/** The fixture study with only its first `n` runs recorded. */
function firstRuns(n: number): StudyRecord {
  const study = fixtureStudy();
  return { ...study, runs: study.runs.slice(0, n) };
}

function invalidNote(study: StudyRecord): readonly string[] {
  return reportSections(reportTables(study)).find((s) => s.id === 'invalid')?.notes ?? [];
}

describe('the partial-study banner', () => {
  const planned = studyPlan(fixtureStudy().metadata.config).runs;

  it('a complete study has none', () => {
    const complete = studyCompleteness(fixtureStudy());
    expect(complete.missing).toEqual([]);
    expect(complete.recorded).toBe(planned.length);
    expect(studyBanner(complete)).toBeUndefined();
  });

  it('7 recorded runs: says how many of how many, valid and invalid, and names what is missing', () => {
    const study = firstRuns(7);
    const completeness = studyCompleteness(study);
    const valid = study.runs.filter((r) => r.valid).length;
    expect(completeness).toEqual({
      planned: planned.length,
      recorded: 7,
      valid,
      invalid: 7 - valid,
      missing: planned.slice(7).map((r) => r.id),
    });
    const banner = studyBanner(completeness) ?? '';
    expect(banner).toMatch(
      new RegExp(
        `^Partial study: 7 of ${planned.length} planned runs recorded \\(${valid} valid, ${7 - valid} invalid\\)\\. `,
      ),
    );
    expect(banner).toContain(`Missing ${planned.length - 7}: ${planned[7]?.id}, ${planned[8]?.id}`);
    expect(banner).toContain(`and ${planned.length - 7 - 12} more.`);
    expect(banner).toContain('lab run resumes the study');
    const markdown = markdownReport(reportTables(study), { source: 'study.json', banner });
    expect(markdown).toContain(`\n\n> **${banner}**\n\n## `);
  });

  it('an empty study says it is empty, and its Invalid runs section does not say every run passed', async () => {
    const study = firstRuns(0);
    const banner = studyBanner(studyCompleteness(study)) ?? '';
    expect(banner).toBe(
      `Empty study: none of the ${planned.length} planned runs has a record yet, so every table below is empty and no comparison can be made. Run the study (lab run), then make the report again.`,
    );
    expect(invalidNote(study)).toEqual(['No run was recorded, so no validity check has run.']);
    const html = await htmlReport(reportTables(study), { source: 'study.json', banner });
    expect(html).toContain(`<p class="banner" id="banner" role="status">${banner}</p>`);
    expect(html).not.toContain('passed every validity check');
  });

  it('a study whose recorded runs are all valid says so of the recorded runs only', () => {
    const study = fixtureStudy();
    const valid = { ...study, runs: study.runs.filter((r) => r.valid) };
    expect(invalidNote(valid)).toEqual(['Every recorded run passed every validity check.']);
  });
});
