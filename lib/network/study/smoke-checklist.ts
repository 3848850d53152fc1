import type { ChecklistEntry, ProofCheck, ProofStatus, SmokeChecklist } from '../../study/smoke-checklist.ts';
import { meanMs } from './fortio-result.ts';
import type { NetworkRun, NetworkRunRecord, NetworkStudyRecord, Precondition } from './model.ts';
import { NETWORK_SMOKE_READY_TIMEOUT_MINUTES } from './smoke.ts';
import {
  datapathCheck,
  fortioResultCheck,
  hostFactsCheck,
  mtlsMatrixCheck,
  type NetworkJudgeConfig,
} from './validity.ts';

/**
 * A cell's smoke checklist (docs/first-run.md), in the first lab's checklist types and format
 * (lib/study/smoke-checklist.ts): one entry for the cell (its host and its datapath proof), then
 * one per run of the smoke plan (each experiment's arms), per run-time proof the full study relies
 * on, pass or fail with the evidence and the fix. Judged from the records alone, by the reasons
 * the full study keeps, so the checklist cannot pass where a full run would be invalid. Nothing
 * stops it: every run has its line, `not reached` when the study stopped before it.
 */

/** The proofs, in the order a run meets them. */
export const NETWORK_PROOFS = [
  'host',
  'datapath',
  'preconditions',
  'job',
  'result',
  'sidecar',
  'mtls',
  'load',
  'services',
  'conntrack',
  'other',
] as const;
export type NetworkProof = (typeof NETWORK_PROOFS)[number];

export const NETWORK_PROOF_TITLES: Readonly<Record<NetworkProof, string>> = {
  host: 'host facts recorded',
  datapath: 'datapath is what the cell claims',
  preconditions: 'preconditions met',
  job: 'client Job succeeded',
  result: 'result file parsed',
  sidecar: 'mesh injection and node placement',
  mtls: 'mTLS evidence',
  load: 'load ran as planned',
  services: "E9 Services, entries and the prober's method",
  conntrack: 'E10 conntrack limit read, lowered and restored',
  other: 'other checks',
};

/** What to do when a proof fails (`<cell>` and `<run-id>` are put in); the evidence says what happened. */
export const NETWORK_PROOF_FIXES: Readonly<Record<NetworkProof, string>> = {
  host: 'the runner reads host/host.json (the bootstrap writes it) and runs a host-command Job for the kernel and CPU flags: lab logs bootstrap --cell <cell>, lab logs runner --cell <cell>',
  datapath:
    "the cell's K3s or Cilium install is not what it claims: lab logs bootstrap --cell <cell> (the datapath step); on Cilium, cilium-dbg status must report KubeProxyReplacement True",
  preconditions: `the mesh namespaces need their Istio label and pods created after it, E9 its backend pods, E10 a conntrack baseline below its threshold; a smoke study waits ${NETWORK_SMOKE_READY_TIMEOUT_MINUTES} min for each (the full study runner.readyTimeoutMinutes): lab logs runner --cell <cell> names what it waited for`,
  job: 'lab logs job <run-id> --cell <cell> shows why the Job failed (image pull, DNS, the server refusing)',
  result:
    "the Job must write its file into its output folder (/out, the cell's results folder jobs/<job>/): lab logs job <run-id> --cell <cell>",
  sidecar:
    "mesh pods need istio-proxy as a native sidecar (the namespace's istio-injection label, pods created after it, istiod injecting: kubectl -n istio-system logs deploy/istiod); plain pods none; every pod on the cell's node",
  mtls: "the destination's Istio counters must grow under connection_security_policy=mutual_tls (mutual TLS as the charts' PeerAuthentication and DestinationRule say): the runner reads the server's sidecar (or the node's ztunnel) on :15020/stats/prometheus; lab logs runner --cell <cell>",
  load: 'the load did not run as planned (the evidence names the check: codes, rate, resolution, Little’s law, sockets, bytes, events); docs/network-study.md lists the checks',
  services:
    "E9's Services, their entries or the prober's method failed (the evidence says which): the runner Role needs Services and EndpointSlices in plain; a prober that does not probe every attempt timeout measures its own start",
  conntrack:
    'the host-command Job (hostNetwork, privileged) must read and write /proc/sys/net/netfilter/nf_conntrack_max; if the limit was left lowered, the next E10 step or a reboot restores it',
  other: 'see the evidence; lab logs runner --cell <cell> has the whole run',
};

/** Which proof an invalid reason belongs to (the reasons of validity*.ts and the runner's steps). */
export function networkProofOfReason(reason: string): NetworkProof {
  if (reason.startsWith('not started: ')) return 'preconditions';
  const r = reason;
  if (/host facts|the host's (instance type|availability zone|kernel)|no version recorded/.test(r))
    return 'host';
  if (
    /datapath was not verified|KubeProxyReplacement|KUBE-SVC chains|kube-proxy nft table|ipvsadm -Ln lists|kube-proxy replacement is active/.test(
      r,
    )
  )
    return 'datapath';
  if (/mTLS|istio_requests_total|istio_tcp_connections_opened_total|sidecar counters|mTLS case/.test(r))
    return 'mtls';
  if (/istio-proxy|ran on node|no pod evidence/.test(r)) return 'sidecar';
  if (
    /E9 method|prober|probe Service|Services had a ready endpoint|entries|LB map|map full|ClusterIPs/.test(r)
  )
    return 'services';
  if (/conntrack|connections succeeded|connections failed with/.test(r)) return 'conntrack';
  if (/left no result|result file|does not parse|^fortio result:|the run left no/.test(r)) return 'result';
  if (/^the run's Job |^job\/|: job\//.test(r)) return 'job';
  if (
    /RetCodes|calls failed|recorded no calls|fortio reports|-qps|resolution|bucket|p50|Little|SocketCount|download|SSE/.test(
      r,
    )
  )
    return 'load';
  return 'other';
}

/** What the checklist needs of the cell besides its records. */
export interface CellChecklistInput {
  readonly plan: { readonly cell: string; readonly runs: readonly NetworkRun[] };
  readonly records: ReadonlyMap<string, NetworkRunRecord>;
  /** The study record so far (host facts, datapath evidence); undefined when it stopped before them. */
  readonly study?: Omit<NetworkStudyRecord, 'runs'>;
  readonly judge: NetworkJudgeConfig;
  readonly studyId: string;
  readonly writtenAt: Date;
  readonly stopped?: string;
}

/** The checklist of a cell's smoke study. */
export function networkSmokeChecklist(input: CellChecklistInput): SmokeChecklist<NetworkProof> {
  const entries = [
    cellEntry(input),
    ...input.plan.runs.map((run) => runEntry(input, run, input.records.get(run.id))),
  ];
  const failed = entries.some((e) => e.checks.some((c) => c.status === 'fail'));
  return {
    studyId: input.studyId,
    cell: input.plan.cell,
    writtenAt: input.writtenAt.toISOString(),
    passed: !failed && input.stopped === undefined,
    entries,
    ...(input.stopped !== undefined ? { stopped: input.stopped } : {}),
  };
}

const check = (
  proof: NetworkProof,
  status: ProofStatus,
  evidence: string,
  fix?: string,
): ProofCheck<NetworkProof> => ({
  proof,
  title: NETWORK_PROOF_TITLES[proof],
  status,
  evidence,
  ...(fix !== undefined ? { fix } : {}),
});

function fixOf(proof: NetworkProof, cell: string, runId: string): string {
  return NETWORK_PROOF_FIXES[proof].replaceAll('<cell>', cell).replaceAll('<run-id>', runId);
}

/** The cell's own entry: the host facts and the datapath proof, read once per study. */
function cellEntry(input: CellChecklistInput): ChecklistEntry<NetworkProof> {
  const { study, judge, plan } = input;
  const head = {
    subject: 'cell',
    runId: 'study',
    title: `Cell ${plan.cell}: ${judge.datapath}, mesh ${judge.mesh}`,
  };
  if (!study) {
    const why = `not reached: the smoke study stopped before reading the host (${input.stopped ?? 'no study record'})`;
    return { ...head, checks: [check('host', 'not-reached', why), check('datapath', 'not-reached', why)] };
  }
  const host = hostFactsCheck(study.host, judge.requiredVersions);
  const datapath = datapathCheck(judge.datapath, study.datapathEvidence);
  const e = study.datapathEvidence;
  return {
    ...head,
    checks: [
      host.length > 0
        ? check('host', 'fail', host.join('; '), fixOf('host', plan.cell, 'study'))
        : check(
            'host',
            'pass',
            `${study.host.instanceType} in ${study.host.availabilityZone}, kernel ${study.host.kernel}, versions ${Object.entries(
              study.host.versions,
            )
              .map(([k, v]) => `${k} ${v}`)
              .join(', ')}`,
          ),
      datapath.length > 0
        ? check('datapath', 'fail', datapath.join('; '), fixOf('datapath', plan.cell, 'study'))
        : check(
            'datapath',
            'pass',
            `${judge.datapath}: ${e?.kubeSvcChains} KUBE-SVC chains, kube-proxy nft table ${e?.nftKubeProxyTable ? 'present' : 'absent'}, ${e?.ipvsServices} ipvs services${e?.kubeProxyReplacement === null || e === undefined ? '' : `, KubeProxyReplacement ${e.kubeProxyReplacement}`}`,
          ),
    ],
  };
}

/** The proofs a run of this kind has, in order (the cell's host and datapath are its own entry). */
function proofsOf(run: NetworkRun): NetworkProof[] {
  const common: NetworkProof[] = ['preconditions', 'job', 'result', 'sidecar'];
  switch (run.spec.kind) {
    case 'fortio':
    case 'download':
    case 'sse':
      return [...common, 'mtls', 'load'];
    case 'mtls':
      return [...common, 'mtls'];
    case 'service-scale':
      return [...common, 'services'];
    case 'conntrack':
      return [...common, 'conntrack'];
  }
}

function subjectOf(run: NetworkRun): string {
  const arm = 'arm' in run.spec ? ` ${run.spec.arm}` : '';
  return `${run.experiment}${arm}`;
}

function runEntry(
  input: CellChecklistInput,
  run: NetworkRun,
  record: NetworkRunRecord | undefined,
): ChecklistEntry<NetworkProof> {
  const head = { subject: subjectOf(run), runId: run.id, title: run.title };
  const proofs = proofsOf(run);
  if (!record) {
    const why = input.stopped ? `not run: the smoke study stopped (${input.stopped})` : 'not run';
    return { ...head, checks: proofs.map((p) => check(p, 'not-reached', why)) };
  }
  const byProof = new Map<NetworkProof, string[]>();
  for (const reason of record.invalidReasons) {
    const proof = networkProofOfReason(reason);
    // The host and datapath reasons repeat on every run: the cell's entry shows them once.
    if (proof === 'host' || proof === 'datapath') continue;
    byProof.set(proof, [...(byProof.get(proof) ?? []), reason]);
  }
  const notStarted = byProof.has('preconditions');
  const checks: ProofCheck<NetworkProof>[] = [];
  for (const proof of [...proofs, 'other' as const]) {
    const reasons = byProof.get(proof);
    if (reasons) checks.push(check(proof, 'fail', reasons.join('; '), fixOf(proof, input.plan.cell, run.id)));
    else if (proof === 'other') continue;
    else if (notStarted)
      checks.push(check(proof, 'not-reached', 'not reached: the run did not start (preconditions)'));
    else checks.push(passed(input, proof, run, record));
  }
  return { ...head, checks };
}

function preconditionText(p: Precondition): string {
  switch (p.kind) {
    case 'namespace-labelled':
      return `namespace ${p.namespace} labelled`;
    case 'pods-restarted-after-label':
      return `pods of ${p.namespace} created after the label`;
    case 'services-ready':
      return `${p.count} Services with ready endpoints`;
    case 'conntrack-baseline-below':
      return `conntrack baseline below ${p.max}`;
  }
}

/** A proof with no failing reason: its evidence from the record, or why it is not judged here. */
function passed(
  input: CellChecklistInput,
  proof: NetworkProof,
  run: NetworkRun,
  r: NetworkRunRecord,
): ProofCheck<NetworkProof> {
  const { judge } = input;
  const result = r.result;
  switch (proof) {
    case 'preconditions':
      return run.preconditions.length === 0
        ? check(proof, 'not-applicable', 'the run has no preconditions')
        : preconditionsCheck(input, run, r);
    case 'job':
      return check(proof, 'pass', `${r.job}${r.attempt ? ` (attempt ${r.attempt})` : ''}`);
    case 'result':
      return check(proof, 'pass', resultEvidence(r));
    case 'sidecar': {
      const pods = r.pods.map(
        (p) => `${p.namespace}/${p.pod} ${p.hasSidecar ? 'with' : 'without'} istio-proxy`,
      );
      return check(proof, 'pass', `${pods.join(', ')}; all on ${judge.node}`);
    }
    case 'mtls':
      return mtlsEvidence(run, r, judge);
    case 'load':
      return check(proof, 'pass', loadEvidence(r));
    case 'services': {
      if (result?.kind !== 'service-scale') return check(proof, 'not-collected', 'no E9 result');
      const { scale } = result;
      const method = scale.prober?.method;
      return check(
        proof,
        'pass',
        `${scale.servicesReady} Services ready, ${scale.entries} entries (${scale.entriesCommand}); prober ${scale.prober?.connected ?? 0} of ${scale.prober?.samples.length ?? 0} samples connected, median ${scale.prober?.latency?.p50Ms.toFixed(1) ?? '?'} ms, method ${method?.verdict ?? '?'} (first-attempt connects ${method?.firstAttemptConnects ?? '?'}, attempts ${method?.medianStepMs ?? '?'} ms apart)`,
      );
    }
    case 'conntrack': {
      if (result?.kind !== 'conntrack') return check(proof, 'not-collected', 'no E10 result');
      const c = result.conntrack;
      return check(
        proof,
        'pass',
        `nf_conntrack_max ${c.limitBefore} before, ${c.limit} during (baseline ${c.baseline}), ${c.driver?.succeeded ?? '?'} of ${c.driver?.connections ?? '?'} connections succeeded, restored to ${c.restoredTo ?? c.limitBefore} (read back ${c.limitAfterRestore})`,
      );
    }
    default:
      return check(proof, 'pass', '');
  }
}

/**
 * The preconditions met, with the mesh restart's evidence: which pods the runner had to restart
 * into the mesh. After a normal bootstrap none should (docs/facts.md §N2: on a sidecar cell
 * istiod's injector fails closed before any mesh pod is created; on an ambient cell istio-cni
 * enrols every pod of a labelled namespace itself), and lab plan counts no restart, so a restart is
 * a WARN.
 */
function preconditionsCheck(
  input: CellChecklistInput,
  run: NetworkRun,
  r: NetworkRunRecord,
): ProofCheck<NetworkProof> {
  const restarted = (r.meshRestart ?? []).filter((m) => m.restarted.length > 0);
  const texts = run.preconditions.map((p) => {
    if (p.kind !== 'pods-restarted-after-label') return preconditionText(p);
    const found = r.meshRestart?.find((m) => m.namespace === p.namespace);
    if (!found) return `${preconditionText(p)} (restarts not recorded by this runner)`;
    return found.restarted.length === 0
      ? `pods of ${p.namespace} in the mesh, none restarted`
      : `pods of ${p.namespace} in the mesh after restarting ${found.restarted.length} created without it (${found.restarted.join(', ')})`;
  });
  if (restarted.length > 0 && input.judge.mesh === 'sidecar') {
    return check(
      'preconditions',
      'warn',
      texts.join(', '),
      `pods of a mesh namespace existed without their sidecar, which a normal bootstrap rules out (istiod's injector, failurePolicy Fail, is installed before the charts: docs/facts.md §N2), so lab plan did not count this restart: were the charts applied before istiod or the namespace label? lab logs bootstrap --cell ${input.plan.cell}`,
    );
  }
  if (restarted.length > 0 && input.judge.mesh === 'ambient') {
    return check(
      'preconditions',
      'warn',
      texts.join(', '),
      `pods of a mesh namespace were not enrolled in ambient (no ambient.istio.io/redirection: enabled), which a normal bootstrap rules out (istio-cni enrols every pod of a labelled namespace and retries until ztunnel accepts it: docs/facts.md §N2), so lab plan did not count this restart: did istio-cni fail to enrol them (its log in istio-system names the pod), or were istio-cni and ztunnel installed after the charts? lab logs bootstrap --cell ${input.plan.cell}`,
    );
  }
  return check('preconditions', 'pass', texts.join(', '));
}

function resultEvidence(r: NetworkRunRecord): string {
  const result = r.result;
  switch (result?.kind) {
    case 'fortio': {
      const read = fortioResultCheck(result.raw);
      return read.result
        ? `fortio JSON: ${read.result.DurationHistogram.Count} calls at ${read.result.ActualQPS.toFixed(1)} QPS, mean ${meanMs(read.result).toFixed(3)} ms`
        : 'fortio JSON';
    }
    case 'download':
      return `curl: HTTP ${result.download.httpCode}, ${result.download.sizeDownloadBytes} bytes in ${result.download.timeTotalSeconds} s`;
    case 'sse':
      return `sse-client: HTTP ${result.sse.status}, ${result.sse.events} events`;
    case 'mtls':
      return `${result.cases.filter((c) => c.observed !== null).length} of ${result.cases.length} curls observed`;
    case 'service-scale':
      return `entries counted, prober result read (${result.scale.prober?.samples.length ?? 0} samples)`;
    case 'conntrack':
      return `conntrack driver result read (${result.conntrack.driver?.connections ?? 0} connections)`;
    default:
      return 'no result';
  }
}

function loadEvidence(r: NetworkRunRecord): string {
  const result = r.result;
  if (result?.kind === 'fortio')
    return 'every call answered OK; rate, histogram resolution, Little’s law and sockets as planned';
  if (result?.kind === 'download') return `every byte arrived (${result.download.sizeDownloadBytes})`;
  if (result?.kind === 'sse') return `every event arrived (${result.sse.events})`;
  return 'as planned';
}

function mtlsEvidence(
  run: NetworkRun,
  r: NetworkRunRecord,
  judge: NetworkJudgeConfig,
): ProofCheck<NetworkProof> {
  if (judge.mesh === 'none') return check('mtls', 'not-applicable', 'the cell has no mesh');
  if (r.result?.kind === 'mtls') {
    const deviations = mtlsMatrixCheck(r.result.cases);
    return check(
      'mtls',
      'pass',
      deviations.length === 0
        ? `every case observed as expected (${r.result.cases.map((c) => `${c.id} HTTP ${c.observed?.httpCode}/exit ${c.observed?.curlExit}`).join(', ')})`
        : `every case observed; deviations are findings, not failures: ${deviations.join('; ')}`,
    );
  }
  const arm = 'arm' in run.spec ? run.spec.arm : undefined;
  if (arm === 'plain') return check('mtls', 'not-applicable', 'the plain arm is out of the mesh');
  if (r.mtlsProof !== 'proven') return check('mtls', 'not-collected', `mtlsProof ${r.mtlsProof ?? 'absent'}`);
  const m = r.mtlsMetrics;
  const counts = (by: Readonly<Record<string, number>> | undefined) =>
    Object.entries(by ?? {})
      .map(([policy, n]) => `${policy} +${n}`)
      .join(', ') || 'none';
  return check(
    'mtls',
    'pass',
    `proven by the ${m?.reporter ?? 'sidecar'}'s counters: istio_requests_total ${counts(m?.requestsBySecurityPolicy)}; istio_tcp_connections_opened_total ${counts(m?.tcpConnectionsBySecurityPolicy)}`,
  );
}
