import { createHash } from 'node:crypto';
import type { LabConfig } from '../config/schema.ts';
import type { StudyMetadata } from '../study/results.ts';
import { chooseLatestUnfinished } from './study-files.ts';

/**
 * Study ids: every study lives in its own folder (`studies/<id>/`, layout.ts), which the host's
 * sync uploads under its own S3 prefix, so no study ever overwrites another's files. A runner
 * that starts resumes the latest unfinished study of the same configuration found there (on a
 * new host, the bootstrap restores that folder from S3 first); `lab run --new` starts a fresh one.
 */

/** JSON with sorted keys, to compare two configurations regardless of key order. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/** The first 8 hex digits of the SHA-256 of the canonical configuration. */
export function configHash(config: LabConfig): string {
  return createHash('sha256').update(canonicalJson(config)).digest('hex').slice(0, 8);
}

/** `20251014-090000-3f2a9c1e`: when the study started (UTC, to the second) and its configuration. */
export function newStudyId(config: LabConfig, at: Date): string {
  const stamp = at.toISOString().slice(0, 19).replace(/[-:]/g, '').replace('T', '-');
  return `${stamp}-${configHash(config)}`;
}

/**
 * A smoke study's id: the time and a hash of the configuration marked as smoke, so it never equals
 * the id of the full study it checks, which may start in the same second.
 */
export function smokeStudyId(config: LabConfig, at: Date): string {
  const stamp = at.toISOString().slice(0, 19).replace(/[-:]/g, '').replace('T', '-');
  const hash = createHash('sha256')
    .update(canonicalJson({ smoke: config }))
    .digest('hex')
    .slice(0, 8);
  return `${stamp}-${hash}`;
}

/** A study id as newStudyId makes it; anything else in `studies/` is not the runner's. */
export function isStudyId(id: string): boolean {
  return /^\d{8}-\d{6}-[0-9a-f]{8}$/.test(id);
}

/** A study found in the results folder. */
export interface StoredStudy {
  readonly id: string;
  readonly metadata: StudyMetadata;
}

/** Which study a starting runner works on, and why (for the log). */
export type StudyChoice =
  | { readonly kind: 'resume'; readonly id: string; readonly why: string }
  | { readonly kind: 'new'; readonly id: string; readonly why: string };

/**
 * The study to work on: with `fresh` (`lab run --new`) always a new one; else the latest
 * unfinished study of the same configuration (by its start time), else a new one. A study of
 * another configuration is never resumed and never touched; a finished one only with
 * `redoInvalid` (`lab run --redo-invalid`), which then runs its invalid runs again.
 */
export function chooseStudy(
  stored: readonly StoredStudy[],
  config: LabConfig,
  now: Date,
  fresh: boolean,
  redoInvalid = false,
): StudyChoice {
  const same = canonicalJson(config);
  return chooseLatestUnfinished({
    fresh,
    newId: newStudyId(config, now),
    // `lab run --redo-invalid`: the latest study of this configuration, finished or not.
    resumable: () =>
      stored
        .filter(
          (s) =>
            s.metadata.profile !== 'smoke' &&
            (redoInvalid || !s.metadata.finishedAt) &&
            canonicalJson(s.metadata.config) === same,
        )
        .map((s) => ({ id: s.id, startedAt: s.metadata.startedAt })),
    resumeWhy: (latest) =>
      redoInvalid
        ? `lab run --redo-invalid: study ${latest.id} (started ${latest.startedAt}) is the latest of this configuration; its invalid runs are run again`
        : `study ${latest.id} (started ${latest.startedAt}) has the same configuration and is unfinished`,
    noneWhy:
      stored.length === 0
        ? 'no earlier study in the results folder'
        : `none of the ${stored.length} earlier studies is an unfinished study of this configuration`,
  });
}
