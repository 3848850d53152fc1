import { chmodSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { synthesizeNetworkCell } from '../../../charts/network/cell-app.ts';
import { cellBootstrapSteps, renderCellSettings } from '../../../lib/aws/bootstrap/cell.ts';
import { parseLabConfig } from '../../../lib/config/load.ts';
import { cellByName } from '../../../lib/network/topology.ts';
import { tempDir } from '../../temp.ts';
import { onlySteps } from './only-steps.ts';
import { makeSandbox, pathWithout, type Sandbox, shFakeCommand } from './sandbox.ts';

/**
 * A network-lab cell's bootstrap in the shell sandbox (sandbox.ts): the fakes a cell adds, the
 * cells' manifests synthesized once, one fault-free run per cell shared by the tests that read it,
 * and runs of only the steps a fault is about.
 */

/** Every datapath, and a mesh on kube-proxy iptables (the default mesh cell). */
export const config = parseLabConfig({
  lab: 'network',
  stackName: 'NetworkLab',
  network: {
    cells: [
      { name: 'mesh', datapath: 'iptables', mesh: 'sidecar' },
      { name: 'dp-iptables', datapath: 'iptables' },
      { name: 'dp-nftables', datapath: 'nftables' },
      { name: 'dp-ipvs', datapath: 'ipvs' },
      { name: 'dp-cilium', datapath: 'cilium' },
    ],
  },
});

const ENV = {
  WAIT_HANDLE_URL: 'https://wait.example/handle?X-Amz-Signature=secret',
  LAB_REGION: 'us-west-2',
  LAB_RESULTS_BUCKET: 'results-bucket',
  LAB_STACK_NAME: 'NetworkLab',
};
/**
 * No waiting between signal retries. A proof (settings.env's PROOF_WAIT_SECONDS) polls once: its
 * fakes answer at once, so a fault's proof fails at its first poll, without a real-time wait; the
 * other waits would poll 1 s apart, but the fakes answer them at once too.
 */
const FAST = { WAIT_INTERVAL_SECONDS: '1', SIGNAL_RETRY_SECONDS: '0', AWS_RETRY_SECONDS: '0' };

/** What each datapath's host shows once its rules are programmed. */
const HOST_STATE: Record<string, Record<string, string>> = {
  iptables: { FAKE_IPTABLES: ':KUBE-SERVICES - [0:0]\\n-A KUBE-SERVICES -j KUBE-SVC-NPX46M4PTMTKRN6Y' },
  nftables: { FAKE_NFT_TABLE: '1', FAKE_IPTABLES: ':POSTROUTING ACCEPT [0:0]' },
  ipvs: { FAKE_IPVS: '1', FAKE_IPTABLES: ':KUBE-SERVICES - [0:0]' },
  cilium: { FAKE_KPR: 'True', FAKE_IPTABLES: ':CILIUM_POST_nat - [0:0]' },
};

/**
 * The commands a cell's bootstrap adds to the sandbox's fakes, steered by FAKE_* variables. POSIX
 * sh (`shFakeCommand`, dash), like the sandbox's own simple fakes: a whole cell run calls them
 * dozens of times (kubectl most), and dash starts in about two thirds of bash's CPU.
 */
const CELL_FAKES: Record<string, string> = {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion, not a template
  uname: shFakeCommand('echo "${FAKE_KERNEL:-6.8.0-1018-aws}"'),
  // kmod's modprobe: with -a it tries every module named and fails when any failed (docs/facts.md §N2).
  modprobe: shFakeCommand(`
status=0
for module in "$@"; do
  case "$module" in -*) continue ;; esac
  if [ "$module" = "\${FAKE_MISSING_MODULE:-}" ]; then echo "modprobe: FATAL: Module $module not found" >&2; status=1; fi
done
exit $status`),
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion, not a template
  'iptables-save': shFakeCommand('printf "%b\\n" "${FAKE_IPTABLES:-}"'),
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion, not a template
  nft: shFakeCommand('[ -n "${FAKE_NFT_TABLE:-}" ]'),
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion, not a template
  ip: shFakeCommand('[ -n "${FAKE_IPVS:-}" ]'),
  kubectl: shFakeCommand(`
case "$*" in
"get nodes -o name") echo node/cell ;;
*"exec ds/cilium"*"cilium-dbg status"*) echo "KVStore: Disabled"; echo "KubeProxyReplacement:    \${FAKE_KPR:-False}   [ens5 10.0.1.23]" ;;
*"run lab-injector-probe"*)
  # FAKE_NO_INJECTOR: the namespace whose pods the injector leaves alone (its label missing), or all.
  if [ "\${FAKE_NO_INJECTOR:-}" = all ] || [ "\${FAKE_NO_INJECTOR:-}" = "$2" ]; then echo '{"spec":{"containers":[{"name": "lab-injector-probe"}]}}'
  else echo '{"spec":{"initContainers":[{"name": "istio-proxy"}],"containers":[{"name": "lab-injector-probe"}]}}'; fi ;;
"get -f "*) echo '{"kind":"List","items":[]}' ;;
esac
exit 0`),
};

/**
 * Helm is there (checksum-verified install is the GPU lab's tested path); it keeps the values it
 * got, as values-<release>.yaml. POSIX sh, like the fakes above.
 */
const HELM = shFakeCommand(`
release=$3
while [ $# -gt 0 ]; do
  if [ "$1" = --values ]; then cp "$2" "$SANDBOX/values-$release.yaml"; fi
  shift
done
exit 0`);

/** Each cell's manifests, synthesized once: the bootstrap only reads them. */
const synthesized = new Map<string, string>();
function cellManifests(cell: ReturnType<typeof cellByName>): string {
  let dir = synthesized.get(cell.name);
  if (!dir) {
    dir = tempDir('lab-cell-');
    synthesizeNetworkCell(config, cell, dir);
    synthesized.set(cell.name, dir);
  }
  return dir;
}

export type CellRun = ReturnType<typeof rehearse>;

/**
 * A cell's bootstrap on a Canonical Ubuntu image: no AWS CLI anywhere on the PATH. With `steps`,
 * main.sh runs only those of the cell's steps (settings.env's STEP_NAMES, as the product renders
 * them, cut to the list): a fault a step is about needs only that step, not the twenty minutes
 * of bootstrap before it. Their markers then count those steps only ("[step 1/2]").
 */
export function rehearse(
  cellName: string,
  fakes: Record<string, string> = {},
  prepare?: (box: Sandbox) => void,
  steps?: readonly string[],
) {
  const cell = cellByName(config.network, cellName);
  const box = makeSandbox();
  rmSync(join(box.root, 'bin', 'aws'));
  for (const [name, body] of Object.entries(CELL_FAKES)) {
    writeFileSync(join(box.root, 'bin', name), body);
    chmodSync(join(box.root, 'bin', name), 0o755);
  }
  writeFileSync(box.path('/usr/local/bin/helm'), HELM);
  chmodSync(box.path('/usr/local/bin/helm'), 0o755);
  const ipvs = join(box.root, 'ip_vs');
  writeFileSync(ipvs, 'IP Virtual Server version 1.2.1 (size=4096)\nTCP  0A2B0001:01BB rr\n');
  const manifests = cellManifests(cell);
  prepare?.(box);
  const result = box.bootstrap(
    config,
    {
      ...ENV,
      PATH: pathWithout('aws', box),
      LAB_MANIFESTS_DIR: manifests,
      ...HOST_STATE[cell.datapath],
      ...fakes,
    },
    {
      ...FAST,
      IPVS_PROC: `'${ipvs}'`,
      PROOF_WAIT_SECONDS: '0',
      ...(steps ? onlySteps(cellBootstrapSteps(config, cell), steps) : {}),
    },
    (c) => renderCellSettings(c, cell),
  );
  return { box, result, calls: box.calls() };
}

/** A cell's bootstrap with no fault, run once per cell for the tests that read it. */
const plainRuns = new Map<string, CellRun>();
export function rehearsed(cellName: string): CellRun {
  let run = plainRuns.get(cellName);
  if (!run) {
    run = rehearse(cellName);
    plainRuns.set(cellName, run);
  }
  return run;
}
