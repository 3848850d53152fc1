import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { LabConfigSchema } from '../config/checked.ts';
import { settingName } from '../config/problems.ts';
import {
  CLIENT_RESULT_KEYS,
  type ClientResultKey,
  STUDY_SCHEMA_VERSION,
  type StudyRecord,
} from '../study/results.ts';

/** Reads and validates a study JSON (`study.json`), the report's only input. */

/** A study JSON that is missing, unreadable or not shaped like a study. */
export class StudyFileError extends Error {
  constructor(
    readonly file: string,
    message: string,
  ) {
    super(message);
    this.name = 'StudyFileError';
  }
}

/** How many schema problems the error lists before summarizing the rest. */
export const MAX_LISTED_PROBLEMS = 5;

const finite = z.number().refine(Number.isFinite, 'must be a finite number');
const nonNegative = finite.refine((n) => n >= 0, 'must be 0 or more');
const fraction = finite.refine((n) => n >= 0 && n <= 1, 'must be a fraction between 0 and 1');

const ClientResultSchema = z.object(
  Object.fromEntries(CLIENT_RESULT_KEYS.map((key) => [key, finite])) as Record<
    ClientResultKey,
    typeof finite
  >,
);

const ClientRecordSchema = z.object({
  benchmarkId: z.string(),
  resultFile: z.string(),
  prompts: nonNegative,
  job: z.enum(['succeeded', 'failed', 'timed-out', 'unschedulable']),
  result: ClientResultSchema.optional(),
});

const ReplicaRecordSchema = z.object({
  replica: z.number().int().nonnegative(),
  pod: z.string(),
  requests: nonNegative,
  queriedTokens: nonNegative,
  hitTokens: nonNegative,
  hitRate: fraction.nullable(),
  vllmSeries: nonNegative,
});

const RunSummarySchema = z.object({
  completed: nonNegative,
  failed: finite,
  totalTokenThroughput: nonNegative,
  outputThroughput: nonNegative,
  meanTtftMs: nonNegative,
  meanItlMs: nonNegative,
  p99TtftMs: nonNegative,
  hitRate: fraction.nullable(),
  requestThroughput: nonNegative.optional(),
  medianTtftMs: nonNegative.optional(),
  meanTpotMs: nonNegative.optional(),
});

const EstimateSchema = z.object({ mean: finite, spread: nonNegative });

const PredictionSchema = z.object({
  arm: z.string(),
  title: z.string(),
  model: z.string(),
  promptBlind: z.string().optional(),
  hitRate: EstimateSchema,
  replicaHitRates: z.array(EstimateSchema),
  requestsPerReplica: z.array(EstimateSchema),
  totalTokensPerSecond: EstimateSchema,
  outputTokensPerSecond: EstimateSchema,
  requestsPerSecond: EstimateSchema,
  meanTtftMs: EstimateSchema,
  medianTtftMs: EstimateSchema,
  p99TtftMs: EstimateSchema,
  meanItlMs: EstimateSchema,
  meanTpotMs: EstimateSchema,
});

const PredictionsSchema = z.object({
  seeds: z.array(z.number().int()),
  arms: z.array(PredictionSchema),
  partition: PredictionSchema,
});

const RunRecordSchema = z.object({
  id: z.string().min(1),
  group: z.enum(['bound', 'partition', 'arm', 'sweep']),
  title: z.string(),
  arm: z.string().optional(),
  dataset: z.enum(['prefix', 'sharegpt']),
  startedAt: z.string(),
  finishedAt: z.string(),
  reset: z.enum(['endpoint', 'pod-restart']),
  clients: z.array(ClientRecordSchema),
  replicas: z.array(ReplicaRecordSchema),
  summary: RunSummarySchema.optional(),
  upperBound: fraction.optional(),
  valid: z.boolean(),
  invalidReasons: z.array(z.string()),
  warnings: z.array(z.string()).optional(),
});

const StudyMetadataSchema = z.object({
  startedAt: z.string(),
  finishedAt: z.string().optional(),
  config: LabConfigSchema,
  versions: z.record(z.string(), z.string()),
  instanceType: z.string().optional(),
  availabilityZone: z.string().optional(),
  gpuUuids: z.record(z.string(), z.string()),
  gpuTopology: z.string().optional(),
  kvCacheTokens: nonNegative.optional(),
  k3sVersion: z.string().optional(),
  predictions: PredictionsSchema.optional(),
});

export const StudyRecordSchema = z.object({
  schemaVersion: z.literal(STUDY_SCHEMA_VERSION),
  metadata: StudyMetadataSchema,
  runs: z.array(RunRecordSchema),
});

/** Validates parsed JSON as a study record; `file` names the source in the error. */
export function parseStudy(json: unknown, file: string): StudyRecord {
  const result = StudyRecordSchema.safeParse(json);
  if (result.success) {
    const study: StudyRecord = result.data;
    return study;
  }
  throw new StudyFileError(
    file,
    `${file} is not a study JSON (schema version ${STUDY_SCHEMA_VERSION}): ${schemaProblems(result.error.issues)}`,
  );
}

/** `3 problem(s)` and the first MAX_LISTED_PROBLEMS of them, one `  - path: message` line each. */
export function schemaProblems(issues: readonly z.core.$ZodIssue[]): string {
  const listed = issues.slice(0, MAX_LISTED_PROBLEMS).map((issue) => {
    const path = settingName(issue.path.map((p) => (typeof p === 'symbol' ? '?' : p)));
    return `  - ${path}: ${issue.message}`;
  });
  const more =
    issues.length > MAX_LISTED_PROBLEMS ? [`  ... and ${issues.length - MAX_LISTED_PROBLEMS} more`] : [];
  return `${issues.length} problem(s)\n${[...listed, ...more].join('\n')}`;
}

/** Reads `file` and validates it; every failure is a `StudyFileError` naming the file. */
export async function loadStudy(file: string): Promise<StudyRecord> {
  return parseStudy(await readStudyJson(file), file);
}

/** Reads `file` as JSON (either lab's study); every failure is a `StudyFileError` naming the file. */
export async function readStudyJson(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      throw new StudyFileError(
        file,
        `${file} not found: a results folder holds the study.json the runner writes`,
      );
    }
    if (code === 'EISDIR') throw new StudyFileError(file, `${file} is a directory, not a study JSON`);
    throw new StudyFileError(file, `cannot read ${file}: ${(error as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new StudyFileError(file, `${file} is not JSON: ${(error as Error).message}`);
  }
}
