import type { Datapath, MeshMode, NetworkCell } from '../../config/network.ts';
import { lbEntriesPerService, networkProblems, networkWarnings } from '../../config/network-rules.ts';
import type { LabConfig } from '../../config/schema.ts';
import { BOOT_MARGIN_MINUTES, baseBudgetMinutes, NETWORK_BASE_STEP_MINUTES } from '../../facts/budgets.ts';
import { alignRows } from '../../study/planner.ts';
import { runJobStarts, studyStartJobs } from './job-starts.ts';
import type { ExperimentId, NetworkRun } from './model.ts';
import { networkStudyPlan } from './plan.ts';
import { NETWORK_SMOKE_TARGET_MINUTES, networkSmokePlan } from './smoke.ts';
import { SMOKE_CONCURRENCY, smokeStudySeconds } from './smoke-schedule.ts';
import {
  DEFAULT_NETWORK_RUN_OVERHEADS,
  type MeshRestartPlan,
  meshRestart,
  type NetworkRunOverheads,
  planSeconds,
} from './timing.ts';

export {
  DEFAULT_NETWORK_RUN_OVERHEADS,
  type MeshRestartPlan,
  type NetworkRunOverheads,
  runSeconds,
} from './timing.ts';

/** How many Jobs a study of these runs starts, its own start's host Jobs included (job-starts.ts). */
export function jobStarts(runs: readonly NetworkRun[], datapath: Datapath): number {
  return studyStartJobs(datapath).length + runs.reduce((sum, run) => sum + runJobStarts(run).length, 0);
}

/**
 * `lab plan` for the network lab (docs/facts.md §N7): before any money is spent, per cell the
 * data-plane entries each E9 step should add, the Cilium LB map's headroom, the conntrack
 * successes each E10 step should see, the runs, the study's duration and cost, and the
 * configurations that cannot measure what they claim. Pure: configuration in, numbers out.
 */

/** How a datapath's entries are counted (docs/facts.md §N3) and what one Service should add. */
export interface EntryModel {
  readonly datapath: Datapath;
  /** The count the runner reads on the host. */
  readonly command: string;
  /** Entries one ClusterIP Service with one TCP port and `backends` endpoints adds. */
  readonly perService: (backends: number) => number;
  /** The formula in words, for the table. */
  readonly formula: string;
  /**
   * `derived`: read from the component's source; `estimate`: the shape is from the source, but the
   * listing's exact lines at the pinned version were not confirmed. The runner's count decides.
   */
  readonly basis: 'derived' | 'estimate';
  readonly source: string;
}

/**
 * Per-datapath entry formulas for one ClusterIP Service with one TCP port and B ready endpoints,
 * cluster traffic policies, no session affinity (the E9 Service template). Read in the sources
 * named per model, at stored versions that are not confirmed as the pinned ones (K3s v1.36.4's
 * kube-proxy, Cilium 1.20.2): estimates, labelled so; the runner's count at each step decides.
 */
export const ENTRY_MODELS: Readonly<Record<Datapath, EntryModel>> = {
  iptables: {
    datapath: 'iptables',
    command: 'iptables-save -t nat | wc -l',
    // kubernetes pkg/proxy/iptables/proxier.go syncProxyRules: a KUBE-SERVICES "cluster IP" rule
    // jumping to KUBE-SVC-*; the KUBE-SVC chain line and its masquerade rule for off-cluster
    // sources (localDetector.IfNotLocal: K3s gives kube-proxy the cluster CIDR);
    // writeServiceToEndpointRules: one rule per endpoint (statistic random for all but the last);
    // per endpoint a KUBE-SEP chain line, its hairpin masquerade rule and its DNAT rule.
    perService: (b) => 1 + (1 + 1 + b) + 3 * b,
    formula:
      '1 KUBE-SERVICES rule + KUBE-SVC (chain, masquerade, B jumps) + B x KUBE-SEP (chain, masquerade, DNAT) = 3 + 4B lines',
    basis: 'estimate',
    source:
      'kubernetes pkg/proxy/iptables/proxier.go syncProxyRules, writeServiceToEndpointRules (stored version, not confirmed as 1.36)',
  },
  nftables: {
    datapath: 'nftables',
    command: 'nft list table ip kube-proxy | wc -l',
    // kubernetes pkg/proxy/nftables/proxier.go syncProxyRules: a cluster-ips set element and a
    // service-ips map element (`ip . tcp . port : goto service-...`); the service chain with its
    // masquerade rule and writeServiceToEndpointRules' single `numgen random mod B vmap` rule; B
    // endpoint chains with a hairpin masquerade rule and a dnat rule each. The lines: `nft list`
    // prints a chain as header + rules + closing brace + blank line (3 lines besides its rules,
    // unconfirmed), a map element on its own line and set elements several to a line (counted 0).
    perService: (b) => 1 + (2 + 3) + b * (2 + 3),
    formula:
      '1 service-ips map line + service chain (2 rules + 3 lines) + B endpoint chains (2 rules + 3 lines) = 6 + 5B',
    basis: 'estimate',
    source:
      'kubernetes pkg/proxy/nftables/proxier.go syncProxyRules, writeServiceToEndpointRules (stored version, not confirmed as 1.36; nft listing layout unconfirmed)',
  },
  ipvs: {
    datapath: 'ipvs',
    command: 'ipvsadm -Ln | wc -l',
    // kubernetes pkg/proxy/ipvs/proxier.go syncProxyRules: one virtual server per ClusterIP:port
    // (syncService) and one real server per endpoint (syncEndpoint); ipvsadm -Ln prints a line
    // each. Not re-read in this version's source: the earlier reading stands.
    perService: (b) => 1 + b,
    formula: '1 virtual server + B real servers = 1 + B lines',
    basis: 'estimate',
    source: 'kubernetes pkg/proxy/ipvs/proxier.go syncService, syncEndpoint',
  },
  cilium: {
    datapath: 'cilium',
    command: 'cilium-dbg bpf lb list',
    // The same function sizes lbMapMax in lab plan and the configuration rule
    // (lib/config/network-rules.ts lbEntriesPerService: wildcard + frontend + B backend slots).
    perService: lbEntriesPerService,
    formula: '1 wildcard entry per ClusterIP + 1 frontend slot + B backend slots = B + 2 LB map entries',
    basis: 'estimate',
    source:
      'cilium BPF reconciler test map dumps (ClusterIP cases: <ip>/ANY SLOT=0 beside <ip>:port/TCP SLOT=0..B), stored version not confirmed as 1.20.2; docs/facts.md §N2',
  },
};

/**
 * A new Service's expected programming latency per datapath, for the prober-resolution check.
 * kube-proxy: its `minSyncPeriod` (1 s default) bounds every mode from below (docs/facts.md §N3).
 * Cilium: an estimate (the agent reconciles a Service into the BPF maps without a sync period); the
 * manual study's 200 ms attempt limit hid it, which is why the lab probes at 20 ms.
 */
export const EXPECTED_PROGRAMMING_MS: Readonly<Record<Datapath, { ms: number; why: string }>> = {
  iptables: { ms: 1_000, why: "kube-proxy's minSyncPeriod (1 s default)" },
  nftables: { ms: 1_000, why: "kube-proxy's minSyncPeriod (1 s default)" },
  ipvs: { ms: 1_000, why: "kube-proxy's minSyncPeriod (1 s default)" },
  cilium: { ms: 200, why: "an estimate of Cilium's reconciliation of a new Service" },
};

/** Above this share of lbMapMax the plan warns: the cell's own Services take slots too. */
export const LB_MAP_NEAR_FULL = 0.9;

export interface ServiceStepPrediction {
  readonly services: number;
  /** Entries the step's Services add over the 0-Service count (the cell's own Services are the baseline). */
  readonly entriesAdded: number;
  /** Cilium: LB map entries of the runner's Services, and what lbMapMax leaves beside them. */
  readonly lbMapEntries?: number;
  readonly lbMapHeadroom?: number;
  readonly lbMapOverflow?: boolean;
}

export interface ConntrackPrediction {
  readonly runId: string;
  readonly limit: number | 'default';
  readonly connections: number;
  /**
   * Successes expected: about one entry per loopback connection (docs/facts.md §N5), so
   * `limit - baseline`, with the baseline anywhere below its threshold; all connections when the
   * limit is the host's default (read at run time, expected far above the connections).
   */
  readonly expectedSucceededMin: number;
  readonly expectedSucceededMax: number;
}

export interface CellPlan {
  readonly cell: string;
  readonly datapath: Datapath;
  readonly mesh: MeshMode;
  readonly instanceType: string;
  readonly pricePerHourUsd: number;
  readonly experiments: readonly ExperimentId[];
  readonly runs: number;
  readonly runsByExperiment: Readonly<Partial<Record<ExperimentId, number>>>;
  /** Jobs the study starts (clients, host commands, prober, driver), each paying a pod start. */
  readonly jobStarts: number;
  /** The mesh pods' restart: counted once where it can happen, and why (timing.ts meshRestart). */
  readonly meshRestart: MeshRestartPlan;
  /** Seconds of load (fortio -t, downloads, streams, probes, conntrack drives). */
  readonly loadSeconds: number;
  /** Seconds around the load (Job starts, API calls, waits), from the overheads. */
  readonly overheadSeconds: number;
  readonly durationSeconds: number;
  readonly costUsd: number;
  readonly entries: {
    readonly command: string;
    readonly formula: string;
    readonly perService: number;
    readonly basis: EntryModel['basis'];
    readonly source: string;
    readonly steps: readonly ServiceStepPrediction[];
  };
  readonly lbMapMax?: number;
  readonly conntrack: readonly ConntrackPrediction[];
  /** The cell's smoke study (lab run --smoke --cell, study.profile: smoke), timed the same way. */
  readonly smoke: SmokeTiming;
  readonly warnings: readonly string[];
}

/** A cell's smoke study: its runs, duration and cost, timed as the full study is. */
export interface SmokeTiming {
  readonly runs: number;
  /** Jobs the smoke study starts. */
  readonly jobStarts: number;
  /** The most runs (so Jobs) its schedule has in flight at once (at most SMOKE_CONCURRENCY). */
  readonly maxConcurrent: number;
  readonly durationSeconds: number;
  readonly costUsd: number;
  /** Over NETWORK_SMOKE_TARGET_MINUTES. */
  readonly overTarget: boolean;
  /**
   * The full study with these checks first. The mesh pods' restart (where it can happen) happens
   * once per cell, in the checks: the full study then finds its pods in the mesh and does not pay
   * it again. Each study reads the host at its start.
   */
  readonly withFullStudy: { readonly durationSeconds: number; readonly costUsd: number };
}

export interface NetworkPlan {
  readonly cells: readonly CellPlan[];
  /** The cells run in parallel, each on its own host: the study lasts as long as the longest. */
  readonly durationSeconds: number;
  readonly costUsd: number;
  readonly runs: number;
  /** Every cell's smoke study, in parallel as the cells run: the longest, and the sum of the costs. */
  readonly smoke: { readonly durationSeconds: number; readonly costUsd: number };
  readonly overheads: NetworkRunOverheads;
  /** Warnings about the configuration as a whole (each cell's are in its plan). */
  readonly warnings: readonly string[];
}

/** The plan of every cell (or of the named ones) of a network-lab configuration. */
export function planNetworkStudy(
  config: LabConfig,
  options: { cells?: readonly string[]; overheads?: NetworkRunOverheads } = {},
): NetworkPlan {
  const overheads = options.overheads ?? DEFAULT_NETWORK_RUN_OVERHEADS;
  const names = options.cells ?? config.network.cells.map((c) => c.name);
  const cells = names.map((name) => planCell(config, name, overheads));
  return {
    cells,
    durationSeconds: Math.max(0, ...cells.map((c) => c.durationSeconds)),
    costUsd: cells.reduce((sum, c) => sum + c.costUsd, 0),
    runs: cells.reduce((sum, c) => sum + c.runs, 0),
    smoke: {
      durationSeconds: Math.max(0, ...cells.map((c) => c.smoke.durationSeconds)),
      costUsd: cells.reduce((sum, c) => sum + c.smoke.costUsd, 0),
    },
    overheads,
    warnings: [
      // The configuration's own rules, not a copy: a loaded configuration has no problems left,
      // but a plan built from an edited one must still say them.
      ...networkProblems(config.network, config.k3s.version).map((p) => `${p.path.join('.')}: ${p.message}`),
      ...networkWarnings(config.network),
    ],
  };
}

function planCell(config: LabConfig, name: string, overheads: NetworkRunOverheads): CellPlan {
  const study = networkStudyPlan(config, name);
  const cell = config.network.cells.find((c) => c.name === name) as NetworkCell;
  const { network } = config;
  const instanceType = cell.instanceType ?? network.instance.type;
  const warnings: string[] = [];
  if (instanceType !== network.instance.type) {
    warnings.push(
      `cost uses network.instance.pricePerHourUsd ${network.instance.pricePerHourUsd} USD/h, the price of ${network.instance.type}, not of this cell's ${instanceType}`,
    );
  }
  const { loadSeconds, overheadSeconds } = planSeconds(study.runs, study, overheads);
  const durationSeconds = loadSeconds + overheadSeconds;
  const pricePerHourUsd = network.instance.pricePerHourUsd;
  const smokeRuns = networkSmokePlan(config, name).runs;
  // The runner's own schedule (smoke-schedule.ts): runs that cannot disturb each other overlap.
  const { seconds: smokeSeconds, schedule } = smokeStudySeconds(smokeRuns, study, overheads);
  const restart = meshRestart(study.mesh);
  const withFullSeconds = smokeSeconds + durationSeconds - restart.seconds;
  const smoke: SmokeTiming = {
    runs: smokeRuns.length,
    jobStarts: jobStarts(smokeRuns, study.datapath),
    maxConcurrent: schedule.maxConcurrent,
    durationSeconds: smokeSeconds,
    costUsd: (smokeSeconds / 3600) * pricePerHourUsd,
    overTarget: smokeSeconds > NETWORK_SMOKE_TARGET_MINUTES * 60,
    withFullStudy: { durationSeconds: withFullSeconds, costUsd: (withFullSeconds / 3600) * pricePerHourUsd },
  };

  const model = ENTRY_MODELS[cell.datapath];
  const scale = network.experiments.serviceScale;
  const perService = model.perService(scale.backendsPerService);
  const lbMapMax = cell.datapath === 'cilium' ? network.cilium.lbMapMax : undefined;
  const steps = scale.steps.map((services): ServiceStepPrediction => {
    const entriesAdded = services * perService;
    if (lbMapMax === undefined) return { services, entriesAdded };
    return {
      services,
      entriesAdded,
      lbMapEntries: entriesAdded,
      lbMapHeadroom: lbMapMax - entriesAdded,
      lbMapOverflow: entriesAdded > lbMapMax,
    };
  });
  warnings.push(...lbMapWarnings(steps, lbMapMax));
  warnings.push(...proberWarnings(cell.datapath, scale.proberAttemptTimeoutMs));
  const conntrack = conntrackPredictions(study.runs);
  warnings.push(...conntrackWarnings(conntrack, network.experiments.conntrack.baselineMax));
  warnings.push(...lifetimeWarnings(durationSeconds, network.instance.maxLifetimeHours));

  const runsByExperiment: Partial<Record<ExperimentId, number>> = {};
  for (const run of study.runs)
    runsByExperiment[run.experiment] = (runsByExperiment[run.experiment] ?? 0) + 1;
  return {
    cell: cell.name,
    datapath: cell.datapath,
    mesh: cell.mesh,
    instanceType,
    pricePerHourUsd,
    experiments: Object.keys(runsByExperiment) as ExperimentId[],
    runs: study.runs.length,
    runsByExperiment,
    jobStarts: jobStarts(study.runs, study.datapath),
    meshRestart: restart,
    loadSeconds,
    overheadSeconds,
    durationSeconds,
    costUsd: (durationSeconds / 3600) * pricePerHourUsd,
    entries: {
      command: model.command,
      formula: model.formula,
      perService,
      basis: model.basis,
      source: model.source,
      steps,
    },
    ...(lbMapMax === undefined ? {} : { lbMapMax }),
    conntrack,
    smoke,
    warnings,
  };
}

function conntrackPredictions(runs: readonly NetworkRun[]): ConntrackPrediction[] {
  return runs.flatMap((run): ConntrackPrediction[] => {
    if (run.spec.kind !== 'conntrack') return [];
    const { limit, connections, baselineMax } = run.spec;
    if (limit === 'default') {
      return [
        {
          runId: run.id,
          limit,
          connections,
          expectedSucceededMin: connections,
          expectedSucceededMax: connections,
        },
      ];
    }
    return [
      {
        runId: run.id,
        limit,
        connections,
        expectedSucceededMin: clamp(limit - baselineMax, 0, connections),
        expectedSucceededMax: clamp(limit, 0, connections),
      },
    ];
  });
}

const clamp = (n: number, min: number, max: number) => Math.min(max, Math.max(min, n));

function conntrackWarnings(predictions: readonly ConntrackPrediction[], baselineMax: number): string[] {
  return predictions.flatMap((p) => {
    if (p.limit === 'default') return [];
    if (p.limit >= p.connections + baselineMax) {
      return [
        `${p.runId}: nf_conntrack_max ${p.limit} holds all ${p.connections} connections plus a baseline below ${baselineMax}: the table never fills; lower the limit or raise network.experiments.conntrack.connections`,
      ];
    }
    if (p.expectedSucceededMin === 0) {
      return [
        `${p.runId}: nf_conntrack_max ${p.limit} is at most the allowed baseline (${baselineMax} entries): the step may see no connection succeed; raise the limit or lower network.experiments.conntrack.baselineMax`,
      ];
    }
    return [];
  });
}

function lbMapWarnings(steps: readonly ServiceStepPrediction[], lbMapMax: number | undefined): string[] {
  if (lbMapMax === undefined) return [];
  return steps.flatMap((s) => {
    const entries = s.lbMapEntries ?? 0;
    if (s.lbMapOverflow) {
      return [
        `e9-services-${s.services}: ${entries.toLocaleString('en-US')} LB map entries overflow network.cilium.lbMapMax ${lbMapMax.toLocaleString('en-US')}: Services would fail to program; raise lbMapMax (before install) or lower the step`,
      ];
    }
    if (entries > LB_MAP_NEAR_FULL * lbMapMax) {
      return [
        `e9-services-${s.services}: ${entries.toLocaleString('en-US')} LB map entries are above ${LB_MAP_NEAR_FULL * 100}% of network.cilium.lbMapMax ${lbMapMax.toLocaleString('en-US')}, and the cell's own Services take slots too`,
      ];
    }
    return [];
  });
}

function proberWarnings(datapath: Datapath, attemptTimeoutMs: number): string[] {
  const expected = EXPECTED_PROGRAMMING_MS[datapath];
  if (attemptTimeoutMs * 10 <= expected.ms) return [];
  return [
    `network.experiments.serviceScale.proberAttemptTimeoutMs ${attemptTimeoutMs} ms is coarser than a tenth of the expected programming latency on ${datapath} (${expected.ms} ms, ${expected.why}): latencies would cluster on multiples of the timeout; use at most ${expected.ms / 10} ms`,
  ];
}

function lifetimeWarnings(durationSeconds: number, maxLifetimeHours: number): string[] {
  const bootstrapMinutes = BOOT_MARGIN_MINUTES + baseBudgetMinutes(NETWORK_BASE_STEP_MINUTES);
  const hours = durationSeconds / 3600 + bootstrapMinutes / 60;
  if (hours <= maxLifetimeHours) return [];
  return [
    `the study (${hours.toFixed(1)} h with up to ${bootstrapMinutes} min of bootstrap) outlives network.instance.maxLifetimeHours ${maxLifetimeHours}: the host would terminate itself first; raise maxLifetimeHours or plan fewer runs`,
  ];
}

const minutes = (seconds: number) => `${(seconds / 60).toFixed(1)} min`;
const count = (n: number) => n.toLocaleString('en-US');

/** The plan as `lab plan` prints it for a network-lab configuration. */
export function formatNetworkPlan(plan: NetworkPlan): string {
  const lines: string[] = [];
  lines.push('Network lab plan (docs/facts.md §N7)', '');
  lines.push(
    alignRows(
      ['cell', 'datapath', 'mesh', 'experiments', 'runs', 'load', 'overhead', 'duration', 'cost'],
      plan.cells.map((c) => [
        c.cell,
        c.datapath,
        c.mesh,
        c.experiments.join(' '),
        String(c.runs),
        minutes(c.loadSeconds),
        minutes(c.overheadSeconds),
        minutes(c.durationSeconds),
        `${c.costUsd.toFixed(2)} USD`,
      ]),
      4,
    ),
  );
  lines.push(
    `  cells run in parallel: ${plan.runs} runs, ${minutes(plan.durationSeconds)} after the bootstraps, about ${plan.costUsd.toFixed(2)} USD in all (${plan.cells[0]?.pricePerHourUsd ?? 0} USD/h per cell; overheads are assumptions: lib/network/study/planner.ts)`,
    '',
  );
  lines.push(
    `Smoke study (lab run --smoke --cell <name>, or study.profile: smoke): every experiment's arms once with a tiny load; target at most ${NETWORK_SMOKE_TARGET_MINUTES} min per cell`,
  );
  lines.push(
    alignRows(
      [
        'cell',
        'smoke runs',
        'Jobs',
        'at once',
        'smoke',
        'smoke cost',
        'full study with its checks',
        'full cost',
      ],
      plan.cells.map((c) => [
        c.cell,
        String(c.smoke.runs),
        String(c.smoke.jobStarts),
        String(c.smoke.maxConcurrent),
        `${minutes(c.smoke.durationSeconds)}${c.smoke.overTarget ? ` (over ${NETWORK_SMOKE_TARGET_MINUTES})` : ''}`,
        `${c.smoke.costUsd.toFixed(2)} USD`,
        minutes(c.smoke.withFullStudy.durationSeconds),
        `${c.smoke.withFullStudy.costUsd.toFixed(2)} USD`,
      ]),
      6,
    ),
  );
  lines.push(
    `  all cells: smoke ${minutes(plan.smoke.durationSeconds)}, about ${plan.smoke.costUsd.toFixed(2)} USD; the full study begins with the same checks: ${minutes(Math.max(0, ...plan.cells.map((c) => c.smoke.withFullStudy.durationSeconds)))}, about ${plan.cells.reduce((sum, c) => sum + c.smoke.withFullStudy.costUsd, 0).toFixed(2)} USD in all`,
    `  every Job started (clients, the study's host facts, E9's and E10's host commands) pays an assumed ${plan.overheads.jobStartSeconds} s pod start`,
    `  runs that cannot disturb each other's evidence overlap, at most ${SMOKE_CONCURRENCY} at once: E9 and E10 run alone, a mesh run's destination gets no other traffic while its counters are read, a saturating run runs beside the mTLS curls only (lib/network/study/smoke-schedule.ts)`,
  );
  for (const c of plan.cells.filter((cell) => cell.mesh !== 'none'))
    lines.push(`  ${c.cell}: mesh pods' restart ${c.meshRestart.why}`);
  lines.push('');

  lines.push('E9 Services at scale: entries each step adds over the 0-Service count');
  const serviceCounts = [...new Set(plan.cells.flatMap((c) => c.entries.steps.map((s) => s.services)))];
  lines.push(
    alignRows(
      ['cell', 'per Service', ...serviceCounts.map((n) => `${count(n)} Svc`), 'basis'],
      plan.cells.map((c) => [
        c.cell,
        `${c.entries.perService} (${c.datapath})`,
        ...serviceCounts.map((n) => {
          const step = c.entries.steps.find((s) => s.services === n);
          return step ? count(step.entriesAdded) : '-';
        }),
        c.entries.basis,
      ]),
    ),
  );
  for (const datapath of [...new Set(plan.cells.map((c) => c.datapath))]) {
    const model = ENTRY_MODELS[datapath];
    lines.push(`  ${datapath}: \`${model.command}\`, ${model.formula} (${model.basis}: ${model.source})`);
  }
  lines.push(
    "  estimate: the runner's count at each step decides; B = network.experiments.serviceScale.backendsPerService",
  );
  const cilium = plan.cells.filter((c) => c.lbMapMax !== undefined);
  for (const c of cilium) {
    const largest = c.entries.steps.at(-1);
    if (largest?.lbMapHeadroom === undefined) continue;
    lines.push(
      `  ${c.cell}: LB map ${count(largest.lbMapEntries ?? 0)} of ${count(c.lbMapMax ?? 0)} entries at ${count(largest.services)} Services, headroom ${count(largest.lbMapHeadroom)}${largest.lbMapOverflow ? ' - OVERFLOW' : ''}`,
    );
  }
  lines.push('');

  lines.push(
    'E10 conntrack: expected successes per step (one entry per loopback connection; baseline below its threshold)',
  );
  lines.push(
    alignRows(
      ['cell', 'step', 'nf_conntrack_max', 'connections', 'expected successes'],
      plan.cells.flatMap((c) =>
        c.conntrack.map((p) => [
          c.cell,
          p.runId,
          p.limit === 'default' ? 'host default' : count(p.limit),
          count(p.connections),
          p.expectedSucceededMin === p.expectedSucceededMax
            ? count(p.expectedSucceededMin)
            : `${count(p.expectedSucceededMin)}-${count(p.expectedSucceededMax)}`,
        ]),
      ),
    ),
  );
  lines.push('');

  const warnings = [...plan.warnings, ...plan.cells.flatMap((c) => c.warnings.map((w) => `${c.cell}: ${w}`))];
  if (warnings.length === 0) {
    lines.push('No warnings: every cell can measure what it claims.');
  } else {
    lines.push('Warnings:', ...warnings.map((w) => `  - ${w}`));
  }
  return `${lines.join('\n')}\n`;
}
