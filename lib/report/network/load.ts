import { existsSync, readdirSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { DATAPATHS, MESH_MODES } from '../../config/network.ts';
import { EXPERIMENTS, LATENCY_ARMS, type NetworkStudyRecord } from '../../network/study/model.ts';
import { readStudyJson, StudyFileError, schemaProblems } from '../load.ts';
import { studyFileOf } from '../write.ts';

/**
 * Reads and validates the `study.json` of a network-lab cell (lib/network/study/model.ts,
 * `NetworkStudyRecord`), the network report's only input, and finds the cells' study files of a
 * results folder.
 */

const finite = z.number().refine(Number.isFinite, 'must be a finite number');
const nonNegative = finite.refine((n) => n >= 0, 'must be 0 or more');
const counted = z.number().int().nonnegative();

const MsDistributionSchema = z.object({
  count: counted,
  minMs: nonNegative,
  meanMs: nonNegative,
  p50Ms: nonNegative,
  p90Ms: nonNegative,
  p99Ms: nonNegative,
  maxMs: nonNegative,
});

const CurlOutcomeSchema = z.object({ httpCode: z.string(), curlExit: z.number().int() });

const arm = z.enum(LATENCY_ARMS);

const RunSpecSchema = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('fortio'),
    arm,
    mode: z.enum(['fixed-rate', 'saturation', 'grpc', 'new-connection']),
    clientNamespace: z.string(),
    url: z.string(),
    qps: nonNegative,
    seconds: nonNegative,
    connections: counted,
    resolutionSeconds: nonNegative,
  }),
  z.object({
    kind: z.literal('download'),
    arm,
    clientNamespace: z.string(),
    url: z.string(),
    bytes: counted,
  }),
  z.object({
    kind: z.literal('sse'),
    arm,
    clientNamespace: z.string(),
    url: z.string(),
    events: counted,
    intervalMs: nonNegative,
  }),
  z.object({
    kind: z.literal('mtls'),
    cases: z.array(
      z.object({
        id: z.string(),
        title: z.string(),
        clientNamespace: z.string(),
        serviceAccount: z.string(),
        inMesh: z.boolean(),
        url: z.string(),
        expected: CurlOutcomeSchema,
      }),
    ),
  }),
  z.object({
    kind: z.literal('service-scale'),
    services: counted,
    samples: counted,
    attemptTimeoutMs: nonNegative,
    createConcurrency: counted,
    backendsPerService: counted,
  }),
  z.object({
    kind: z.literal('conntrack'),
    limit: z.union([counted, z.literal('default')]),
    connections: counted,
    connectTimeoutSeconds: nonNegative,
    baselineMax: counted,
  }),
]);

const ProberSchema = z.object({
  probe: z.literal('service-prober'),
  attemptTimeoutMs: nonNegative,
  giveUpMs: nonNegative,
  samples: z.array(
    z.object({
      target: z.string(),
      connected: z.boolean(),
      latencyMs: z.number().nullable(),
      firstAttemptAfterMs: nonNegative,
      attempts: counted,
      attemptsAfterStart: counted.optional(),
      resolutionMs: nonNegative.nullable().optional(),
      timeoutStepMs: nonNegative.nullable().optional(),
      refused: counted,
      timedOut: counted,
      otherErrors: z.record(z.string(), counted),
    }),
  ),
  connected: counted,
  failed: counted,
  latency: MsDistributionSchema.nullable(),
  quantization: z.object({
    verdict: z.enum(['clustered', 'not-clustered', 'too-few']),
    stepMs: nonNegative,
    considered: counted,
    onMultiples: counted,
    toleranceMs: nonNegative,
    onMultiplesP: nonNegative,
    phaseP: nonNegative.nullable(),
    reason: z.string(),
  }),
  method: z
    .object({
      verdict: z.enum(['datapath', 'method']),
      attemptTimeoutMs: nonNegative,
      firstAttemptConnects: counted,
      lateFirstAttempts: counted,
      connectedBeforeStart: counted,
      medianStepMs: nonNegative.nullable(),
      reasons: z.array(z.string()),
    })
    .optional(),
});

const ConntrackDriverSchema = z.object({
  probe: z.literal('conntrack-driver'),
  target: z.string(),
  connections: counted,
  connectTimeoutMs: nonNegative,
  holdMs: nonNegative,
  succeeded: counted,
  failed: counted,
  failures: z.record(z.string(), counted),
  connect: MsDistributionSchema.nullable(),
  droppedDuringHold: counted,
  issuedInMs: nonNegative,
  openFilesLimit: counted.nullable(),
});

const SseSchema = z.object({
  probe: z.literal('sse-client'),
  url: z.string(),
  status: z.number().int(),
  events: counted,
  expectedEvents: counted,
  connectMs: nonNegative.nullable(),
  firstEventMs: nonNegative.nullable(),
  durationMs: nonNegative,
  gaps: MsDistributionSchema.nullable(),
  errors: z.array(z.string()),
});

const RunResultSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('fortio'), raw: z.string() }),
  z.object({
    kind: z.literal('download'),
    download: z.object({
      httpCode: z.string(),
      curlExit: z.number().int(),
      sizeDownloadBytes: nonNegative,
      speedDownloadBytesPerSecond: nonNegative,
      timeTotalSeconds: nonNegative,
    }),
  }),
  z.object({ kind: z.literal('sse'), sse: SseSchema }),
  z.object({
    kind: z.literal('mtls'),
    cases: z.array(
      z.object({ id: z.string(), expected: CurlOutcomeSchema, observed: CurlOutcomeSchema.nullable() }),
    ),
  }),
  z.object({
    kind: z.literal('service-scale'),
    scale: z.object({
      servicesReady: counted,
      entries: counted,
      entriesCommand: z.string(),
      lbMapFull: z.boolean().optional(),
      prober: ProberSchema.nullable(),
      newConnection: z.string().optional(),
    }),
  }),
  z.object({
    kind: z.literal('conntrack'),
    conntrack: z.object({
      limitBefore: counted,
      limit: counted,
      baseline: counted,
      limitAfterRestore: counted.nullable(),
      restoredTo: counted.optional(),
      driver: ConntrackDriverSchema.nullable(),
    }),
  }),
]);

const RunRecordSchema = z.object({
  id: z.string().min(1),
  cell: z.string(),
  experiment: z.enum(EXPERIMENTS),
  title: z.string(),
  repeat: counted.optional(),
  repeatGroup: z.string().optional(),
  spec: RunSpecSchema,
  startedAt: z.string(),
  finishedAt: z.string(),
  job: z.enum(['succeeded', 'failed', 'timed-out']),
  result: RunResultSchema.optional(),
  pods: z.array(
    z.object({ pod: z.string(), namespace: z.string(), node: z.string(), hasSidecar: z.boolean() }),
  ),
  mtlsMetrics: z
    .object({
      requestsBySecurityPolicy: z.record(z.string(), nonNegative),
      tcpConnectionsOpened: nonNegative,
      tcpConnectionsBySecurityPolicy: z.record(z.string(), nonNegative).optional(),
      reporter: z.enum(['sidecar', 'ztunnel']).optional(),
    })
    .optional(),
  mtlsProof: z.enum(['proven', 'unproven', 'contradicted']).optional(),
  valid: z.boolean(),
  invalidReasons: z.array(z.string()),
  flags: z.array(z.string()).optional(),
  attempt: counted.optional(),
  meshRestart: z.array(z.object({ namespace: z.string(), restarted: z.array(z.string()) })).optional(),
});

export const NetworkStudyRecordSchema = z.object({
  lab: z.literal('network'),
  studyId: z.string().min(1),
  cell: z.string().min(1),
  datapath: z.enum(DATAPATHS),
  mesh: z.enum(MESH_MODES),
  host: z.object({
    instanceType: z.string(),
    availabilityZone: z.string(),
    kernel: z.string(),
    cpuFlags: z.array(z.string()),
    versions: z.record(z.string(), z.string()),
  }),
  datapathEvidence: z
    .object({
      kubeProxyReplacement: z.boolean().nullable(),
      kubeSvcChains: counted,
      nftKubeProxyTable: z.boolean(),
      ipvsServices: counted,
    })
    .optional(),
  conntrackHostDefault: counted.optional(),
  startedAt: z.string(),
  finishedAt: z.string().optional(),
  state: z.enum(['running', 'finished', 'failed', 'interrupted']),
  error: z.string().optional(),
  runs: z.array(RunRecordSchema),
});

/** Validates parsed JSON as a cell's network study; `file` names the source in the error. */
export function parseNetworkStudy(json: unknown, file: string): NetworkStudyRecord {
  const result = NetworkStudyRecordSchema.safeParse(json);
  if (result.success) {
    const study: NetworkStudyRecord = result.data;
    return study;
  }
  throw new StudyFileError(
    file,
    `${file} is not a network study JSON (lab: "network"): ${schemaProblems(result.error.issues)}`,
  );
}

/** Whether parsed JSON claims to be a network study (`lab: "network"`); the schema decides the rest. */
export function isNetworkStudyJson(json: unknown): boolean {
  return typeof json === 'object' && json !== null && (json as { lab?: unknown }).lab === 'network';
}

/** Whether the study file of `dir` (`studyFileOf`) exists and says `lab: "network"`. */
async function networkStudyFileOf(dir: string): Promise<string | undefined> {
  const file = studyFileOf(dir);
  if (!existsSync(file)) return undefined;
  try {
    return isNetworkStudyJson(JSON.parse(await readFile(file, 'utf8'))) ? file : undefined;
  } catch {
    // Not readable as JSON: not recognisably a network study; the first lab's loader names the problem.
    return undefined;
  }
}

/**
 * The network study files a results folder holds: its own (a cell's folder, `studyFileOf`), or
 * else one per cell folder inside it (a downloaded results prefix holds `<cell>/` folders: the
 * stack syncs each cell to `<stack>/<cell>/`), in name order. Empty when none is a network study.
 */
export async function networkStudyFiles(dir: string): Promise<string[]> {
  const own = await networkStudyFileOf(dir);
  if (own) return [own];
  if (!existsSync(dir) || !statSync(dir).isDirectory()) return [];
  const files: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const sub = join(dir, name);
    if (!statSync(sub).isDirectory()) continue;
    const file = await networkStudyFileOf(sub);
    if (file) files.push(file);
  }
  return files;
}

/** Reads and validates each file; two studies of one cell are refused (which one would count?). */
export async function loadNetworkStudies(files: readonly string[]): Promise<NetworkStudyRecord[]> {
  const studies: NetworkStudyRecord[] = [];
  const seen = new Map<string, string>();
  for (const file of files) {
    const study = parseNetworkStudy(await readStudyJson(file), file);
    const earlier = seen.get(study.cell);
    if (earlier) {
      throw new StudyFileError(
        file,
        `${file} and ${earlier} are both studies of cell ${study.cell}: give one folder per cell`,
      );
    }
    seen.set(study.cell, file);
    studies.push(study);
  }
  return studies;
}
