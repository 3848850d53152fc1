import type { LabConfig } from '../config/schema.ts';

/**
 * What a starting runner works on, for either lab (docs/first-run.md): the smoke study when
 * `lab run --smoke` asked for it, or when `study.profile` is `smoke` and no smoke study of this
 * configuration (and cell) has finished yet; otherwise the full study, which checks every arm or
 * experiment with the smoke plan before its first long run. Each lab's lab-study.ts gives its
 * plans, its store's view of finished smoke studies and its two study runners.
 */

/** The two plans a runner carries (runner-files.ts: plan.json and smoke-plan.json). */
export interface PlansOf<P> {
  readonly full: P;
  readonly smoke: P;
}

/** The smoke study's checklist, or the full study's record. */
export type StudyOutcomeOf<S, R> =
  | { readonly kind: 'smoke'; readonly outcome: S }
  | { readonly kind: 'full'; readonly study: R };

/** What one lab's runner brings to the choice. */
export interface SmokeOrFullParts<P, S extends { readonly error?: unknown }, R, Stored> {
  readonly config: LabConfig;
  readonly plans: PlansOf<P>;
  /** The results folder: the smoke request (taken here) and the studies it holds. */
  readonly store: {
    takeSmokeRequest(): Promise<boolean>;
    listStudies(): Promise<{ readonly studies: readonly Stored[] }>;
  };
  /** A stored study that is a finished smoke study of this configuration (and cell). */
  readonly finishedSmoke: (study: Stored) => boolean;
  /** Why the smoke study runs when none has finished (`study.profile is smoke and ...`). */
  readonly noneFinished: string;
  /** The log line that says the smoke study runs, and why. */
  readonly smokeLine: (why: string) => string;
  readonly log: (line: string) => void;
  /** The full study, with the smoke plan as its checks. */
  readonly runFull: (full: P, checks: P) => Promise<R>;
  /** The smoke study: never throws, its stop comes back as `error` beside its checklist. */
  readonly runSmoke: (smoke: P) => Promise<S>;
}

/** Runs the smoke or the full study; a stopped smoke study throws its stop after its checklist is written. */
export async function runSmokeOrFull<P, S extends { readonly error?: unknown }, R, Stored>(
  parts: SmokeOrFullParts<P, S, R, Stored>,
): Promise<StudyOutcomeOf<S, R>> {
  const why = await smokeWhy(parts);
  if (why === undefined) {
    return { kind: 'full', study: await parts.runFull(parts.plans.full, parts.plans.smoke) };
  }
  parts.log(parts.smokeLine(why));
  const outcome = await parts.runSmoke(parts.plans.smoke);
  if (outcome.error) throw outcome.error;
  return { kind: 'smoke', outcome };
}

/** Why this runner runs the smoke study, or undefined for the full study. The request is taken. */
async function smokeWhy<Stored>(
  parts: Pick<
    SmokeOrFullParts<never, never, never, Stored>,
    'store' | 'config' | 'finishedSmoke' | 'noneFinished'
  >,
): Promise<string | undefined> {
  if (await parts.store.takeSmokeRequest()) return 'lab run --smoke asked for it';
  if (parts.config.study.profile !== 'smoke') return undefined;
  const { studies } = await parts.store.listStudies();
  return studies.some(parts.finishedSmoke) ? undefined : parts.noneFinished;
}
