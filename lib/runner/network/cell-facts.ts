import type { NetworkCell } from '../../config/network.ts';
import type { LabConfig } from '../../config/schema.ts';
import type { CellHostFacts, DatapathEvidence } from '../../network/study/model.ts';
import type { NetworkJudgeConfig } from '../../network/study/validity.ts';
import { FORTIO_SERVER, PLAIN_NAMESPACE } from '../../network/topology.ts';
import { rethrowOutage } from '../call-policy.ts';
import { HOST_FILE } from '../layout.ts';
import {
  CILIUM_STATUS_SCRIPT,
  DATAPATH_SCRIPT,
  HOST_FACTS_SCRIPT,
  parseDatapathEvidence,
  parseHostFacts,
} from './host-output.ts';
import type { StepContext } from './runner-context.ts';

/** What a cell's study reads once: the host's facts and its datapath (docs/facts.md §N5). */

/** The versions every record names (docs/facts.md §N5), by component; k3s is read at run time. */
export function requiredVersions(config: LabConfig, cell: NetworkCell): Record<string, string> {
  const c = config.network;
  return {
    fortio: c.fortio.image,
    netshoot: c.probeImage,
    runner: config.runner.image,
    ...(cell.datapath === 'cilium' ? { cilium: c.cilium.version } : {}),
    ...(cell.mesh !== 'none' ? { istio: c.istio.version } : {}),
    k3s: '',
  };
}

/** The cell's settings the validity checks judge against (lib/network/study/validity.ts). */
export function cellJudgeConfig(
  config: LabConfig,
  cell: NetworkCell,
  node: string | undefined,
): NetworkJudgeConfig {
  const { network } = config;
  return {
    datapath: cell.datapath,
    mesh: cell.mesh,
    node: node ?? 'unknown (no fortio server pod found at the start of the study)',
    lbMapMax: network.cilium.lbMapMax,
    requiredVersions: Object.keys(requiredVersions(config, cell)),
    resolutionSeconds: network.fortio.resolutionSeconds,
    connections: network.fortio.connections,
  };
}

/** The cell's node: where the charts pinned the plain fortio server (every pod must run there). */
export async function cellNode(ctx: StepContext): Promise<string | undefined> {
  try {
    const pods = await ctx.cluster.listPods(PLAIN_NAMESPACE, `app=${FORTIO_SERVER}`);
    return pods.find((p) => p.node !== '')?.node;
  } catch (error) {
    rethrowOutage(error);
    await ctx.say(`the cell's node not found: ${(error as Error).message}`);
    return undefined;
  }
}

/** What the study's host Job printed, or why it printed nothing. */
interface HostJobOutput {
  readonly text?: string;
  readonly error?: string;
}

/**
 * The host's facts and its datapath's rules, read once per study with ONE host Job (a pod start
 * is the cost: lib/network/study/job-starts.ts), plus `cilium-dbg status` on a Cilium cell. What
 * `existing` (a resumed study's record) already holds is not read again.
 */
export async function studyFacts(
  ctx: StepContext,
  existing?: { readonly host?: CellHostFacts; readonly datapathEvidence?: DatapathEvidence },
): Promise<{ host: CellHostFacts; datapath: DatapathEvidence | undefined }> {
  const scripts = [
    ...(existing?.host ? [] : [HOST_FACTS_SCRIPT]),
    ...(existing?.datapathEvidence ? [] : [DATAPATH_SCRIPT]),
  ];
  let output: HostJobOutput = {};
  if (scripts.length > 0) {
    try {
      output = { text: await ctx.jobs.hostOutput('host-facts', 'study', scripts.join('; ')) };
    } catch (error) {
      rethrowOutage(error);
      output = { error: (error as Error).message };
    }
  }
  const host = existing?.host ?? (await hostFacts(ctx, output));
  const datapath = existing?.datapathEvidence ?? (await datapathEvidence(ctx, output));
  return { host, datapath };
}

/** Instance type and zone from the bootstrap's host.json; kernel and CPU flags from the host Job. */
async function hostFacts(ctx: StepContext, output: HostJobOutput): Promise<CellHostFacts> {
  let host: { instanceType?: unknown; availabilityZone?: unknown; k3sVersion?: unknown } = {};
  const text = await ctx.deps.store.readHostFile(HOST_FILE);
  if (text === undefined) await ctx.say(`${HOST_FILE} not found: instance type and zone not recorded`);
  else {
    try {
      host = JSON.parse(text);
    } catch (error) {
      await ctx.say(`${HOST_FILE} is not JSON (${(error as Error).message})`);
    }
  }
  let kernel = 'unknown';
  let cpuFlags: string[] = [];
  try {
    if (output.text === undefined) throw new Error(output.error ?? 'no host Job ran');
    const facts = parseHostFacts(output.text);
    kernel = facts.kernel;
    cpuFlags = facts.cpuFlags;
  } catch (error) {
    await ctx.say(`host facts not read: ${(error as Error).message}`);
  }
  const { k3s: _read, ...pinned } = requiredVersions(ctx.config, ctx.cell);
  const versions: Record<string, string> = { k3sConfigured: ctx.config.k3s.version, ...pinned };
  try {
    versions.k3s = await ctx.cluster.serverVersion();
  } catch (error) {
    rethrowOutage(error);
    await ctx.say(`API server version not read: ${(error as Error).message}`);
    if (typeof host.k3sVersion === 'string') versions.k3s = host.k3sVersion;
  }
  const facts: CellHostFacts = {
    instanceType: typeof host.instanceType === 'string' ? host.instanceType : 'unknown',
    availabilityZone: typeof host.availabilityZone === 'string' ? host.availabilityZone : 'unknown',
    kernel,
    cpuFlags,
    versions,
  };
  await ctx.say(
    `host: ${facts.instanceType} in ${facts.availabilityZone}, kernel ${kernel}, CPU flags ${cpuFlags.join(' ') || 'none of interest'}`,
  );
  return facts;
}

/** What the datapath really is on the host (docs/facts.md §N5); undefined when not read. */
async function datapathEvidence(
  ctx: StepContext,
  output: HostJobOutput,
): Promise<DatapathEvidence | undefined> {
  try {
    if (output.text === undefined) throw new Error(output.error ?? 'no host Job ran');
    const cilium =
      ctx.cell.datapath === 'cilium'
        ? await ctx.jobs.hostOutput('cilium-status', 'study', CILIUM_STATUS_SCRIPT, true)
        : undefined;
    const evidence = parseDatapathEvidence(output.text, cilium);
    await ctx.say(
      `datapath evidence: ${evidence.kubeSvcChains} KUBE-SVC chains, kube-proxy nft table ${evidence.nftKubeProxyTable ? 'present' : 'absent'}, ${evidence.ipvsServices} ipvs services${evidence.kubeProxyReplacement === null ? '' : `, KubeProxyReplacement ${evidence.kubeProxyReplacement}`}`,
    );
    return evidence;
  } catch (error) {
    rethrowOutage(error);
    await ctx.say(`datapath evidence not read: ${(error as Error).message}`);
    return undefined;
  }
}
