import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { BOOTSTRAP_SOURCES, READY_MARKER } from '../../../lib/aws/bootstrap/bootstrap.ts';
import {
  cellBootstrapSteps,
  cellK3sExec,
  IPVS_MODULES,
  renderCellSettings,
} from '../../../lib/aws/bootstrap/cell.ts';
import { NETWORK_STEP_NAMES, networkMinimumReadyTimeoutMinutes } from '../../../lib/facts/budgets.ts';
import { cellByName } from '../../../lib/network/topology.ts';
import { tempDir } from '../../temp.ts';
import { needs, SHELLCHECK } from '../../tools.ts';
import { config, rehearse, rehearsed } from './cell-rehearse.ts';
import type { Sandbox } from './sandbox.ts';

/** The instance role's keys the fake metadata service hands out (test/aws/bootstrap/sandbox.ts). */
const ROLE_SECRETS = ['fake/secret+key-never-logged', 'fake-session-token-never-logged'];

describe('a network-lab cell bootstrap, rehearsed with fake system commands', () => {
  test.each(['mesh', 'dp-iptables', 'dp-nftables', 'dp-ipvs', 'dp-cilium'])(
    '%s: every step in order, the datapath proven, then SUCCESS',
    (name) => {
      const cell = cellByName(config.network, name);
      const { box, result, calls } = rehearsed(name);
      expect(result.status, box.log()).toBe(0);
      const steps = cellBootstrapSteps(config, cell);
      // Only real image references are pulled, not the `image:` lines of the runner's bundled code.
      const pulled = [...box.log().matchAll(/pulled (\S+)$/gm)].map((m) => m[1]);
      expect(pulled.length).toBeGreaterThan(0);
      for (const image of pulled) expect(image).toMatch(/^[a-z0-9][\w./-]*(:[\w.-]+)?(@sha256:[0-9a-f]+)?$/);
      const markers = [...box.log().matchAll(/==> \[step (\d+)\/(\d+)\] ([^(]+)/g)];
      expect(markers.map((m) => m[3]?.trim())).toEqual(steps.map((s) => s.title.replace(/\(.*$/, '').trim()));
      expect(calls).toContain(`k3s-install v1.36.4+k3s1|${cellK3sExec(config, cell)}`);
      const [signal] = box.signals();
      expect(signal?.body).toMatchObject({ Status: 'SUCCESS' });
      expect(signal?.body.Data).toMatch(
        new RegExp(`^cell ${name}: datapath ${cell.datapath} proven, mesh ${cell.mesh}`),
      );
      expect(existsSync(box.path(READY_MARKER))).toBe(true);
      // With no AWS CLI, the log and the results still reach S3 under the cell's prefix (curl signs
      // each PutObject); the studies restore listed the cell's own prefix.
      const log = `results-bucket/NetworkLab/${name}/host/bootstrap.log`;
      expect(box.awsRequests()).toContain(`PUT ${log}`);
      expect(box.s3Object(log)).toContain('lab ready');
      expect(box.awsRequests()).toContain(`LIST results-bucket/NetworkLab/${name}/studies/`);
      // The role's keys reached curl only through private config files, since removed: never a
      // command line, the log, or a file others can read.
      const configs = box.curlConfigFiles();
      expect(configs.length).toBeGreaterThan(0);
      for (const file of configs) {
        expect(file.mode).toBe('600');
        expect(existsSync(file.path)).toBe(false);
      }
      for (const secret of ROLE_SECRETS) {
        expect(calls.join('\n')).not.toContain(secret);
        expect(box.log()).not.toContain(secret);
        expect(readableFilesContaining(box.root, secret, join(box.root, 'bin'))).toEqual([]);
      }
    },
  );

  test('the Cilium cell: K3s without flannel and kube-proxy, Cilium installed with the node IP from IMDSv2', () => {
    const { box, result, calls } = rehearsed('dp-cilium');
    expect(result.status, box.log()).toBe(0);
    expect(calls).toContainEqual(
      expect.stringContaining('--flannel-backend=none --disable-network-policy --disable-kube-proxy'),
    );
    expect(box.log()).toContain("containerd's defaults /etc/cni/net.d and /opt/cni/bin apply");
    expect(calls).toContainEqual(
      expect.stringMatching(
        /^helm upgrade --install cilium cilium --repo https:\/\/helm\.cilium\.io --version 1\.20\.2 --namespace kube-system --create-namespace --values .* --wait/,
      ),
    );
    const values = readFileSync(join(box.root, 'values-cilium.yaml'), 'utf8');
    expect(values).toContain('k8sServiceHost: 10.0.1.23');
    expect(values).not.toContain('__LAB_NODE_PRIVATE_IP__');
    expect(box.log()).toMatch(/KubeProxyReplacement: +True/);
  });

  test('the mesh cell installs Istio base and istiod from their repository and checks the injector', () => {
    const { box, result, calls } = rehearsed('mesh');
    expect(result.status, box.log()).toBe(0);
    const installs = calls.filter((c) => c.startsWith('helm upgrade --install')).map((c) => c.split(' ')[3]);
    expect(installs).toEqual(['istio-base', 'istiod']);
    // Both mesh namespaces: the policies' (mesh) and E2's no-policy row's (mesh-default).
    for (const namespace of ['mesh', 'mesh-default']) {
      expect(calls).toContain(
        `kubectl -n ${namespace} run lab-injector-probe --image=registry.k8s.io/pause:3.10 --restart=Never --dry-run=server -o json`,
      );
      expect(box.log()).toContain(`istiod's injector adds istio-proxy to pods in ${namespace}\n`);
    }
  });

  test('the ipvs cell loads the ip_vs modules first, all in one modprobe', () => {
    const { box, result, calls } = rehearsed('dp-ipvs');
    expect(result.status, box.log()).toBe(0);
    expect(calls.filter((c) => c.startsWith('modprobe'))).toEqual([`modprobe -a ${IPVS_MODULES.join(' ')}`]);
    expect(box.log()).toContain(`ipvs modules loaded: ${IPVS_MODULES.join(' ')}\n`);
  });
});

/** Files under `dir` that others may read and that hold `text`, but those of `fakes` (the fake commands). */
function readableFilesContaining(dir: string, text: string, fakes: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.parentPath !== fakes)
    .map((e) => join(e.parentPath, e.name))
    .filter((file) => (statSync(file).mode & 0o004) !== 0 && readFileSync(file, 'utf8').includes(text));
}

/**
 * Each fault runs only the steps it is about (`rehearse`'s `steps`: main.sh's own loop over a cut
 * STEP_NAMES), up to the step that must not be reached: the bootstrap before them is the same code
 * the fault-free runs above go through. A fault in the first step runs the whole bootstrap.
 */
describe('preflights and proofs fail fast with the cause', () => {
  const failure = (
    name: string,
    fakes: Record<string, string>,
    steps?: readonly string[],
    prepare?: (box: Sandbox) => void,
  ) => {
    // These tests read no curl config file's mode: the fake curl notes "?" instead of a `stat` each.
    const { box, result, calls } = rehearse(
      name,
      { FAKE_CONFIG_MODES_UNREAD: '1', ...fakes },
      prepare,
      steps,
    );
    expect(result.status).not.toBe(0);
    const signals = box.signals();
    expect(signals.map((s) => s.body.Status)).toEqual(['FAILURE']);
    return { reason: String(signals[0]?.body.Reason), calls, log: box.log() };
  };
  /** The step a fault is in, and K3s's install after it (which the fault must keep from running). */
  const BEFORE_K3S = ['preflight_datapath', 'install_cell_k3s'];

  test('a curl too old to sign S3 requests fails the cost guard step, naming the version found', () => {
    const { reason, calls } = failure('dp-iptables', { FAKE_OLD_CURL: '7.81.0' });
    expect(reason).toMatch(
      /^\[step 1\/10\] arm the cost guard: .* failed: curl 7\.81\.0 cannot sign AWS requests/,
    );
    expect(reason).toContain('from curl 7.86.0 on');
    expect(calls.some((c) => c.startsWith('k3s-install'))).toBe(false);
  });

  test('nftables on a kernel older than 5.13, before K3s is installed', () => {
    const { reason, calls } = failure('dp-nftables', { FAKE_KERNEL: '5.10.0-28-cloud-amd64' }, BEFORE_K3S);
    expect(reason).toContain('datapath nftables needs kernel >= 5.13, this host runs 5.10.0-28-cloud-amd64');
    expect(calls.some((c) => c.startsWith('k3s-install'))).toBe(false);
  });

  test('ipvs without an ip_vs module: named after one modprobe -a and one modprobe per module up to it', () => {
    const { reason, calls } = failure('dp-ipvs', { FAKE_MISSING_MODULE: 'ip_vs_sh' }, BEFORE_K3S);
    expect(reason).toContain("datapath ipvs needs kernel module ip_vs_sh: 'modprobe ip_vs_sh' failed");
    expect(calls.filter((c) => c.startsWith('modprobe'))).toEqual([
      `modprobe -a ${IPVS_MODULES.join(' ')}`,
      ...IPVS_MODULES.slice(0, IPVS_MODULES.indexOf('ip_vs_sh') + 1).map((m) => `modprobe ${m}`),
    ]);
    expect(calls.some((c) => c.startsWith('k3s-install'))).toBe(false);
  });

  test("Cilium where K3s's containerd looks for CNI elsewhere", () => {
    const { reason, calls } = failure('dp-cilium', {}, ['install_cell_k3s', 'pull_cell_images'], (box) => {
      const config = box.path('/var/lib/rancher/k3s/agent/etc/containerd/config.toml');
      writeFileSync(
        join(box.root, 'k3s-install.sh'),
        `#!/bin/sh\nmkdir -p '${join(config, '..')}'\nprintf '%s\\n' 'version = 3' "  bin_dirs = [\\"/var/lib/rancher/k3s/data/cni\\"]" '  conf_dir = "/var/lib/rancher/k3s/agent/etc/cni/net.d"' > '${config}'\n`,
      );
    });
    expect(reason).toContain('with flannel off Cilium installs its CNI into /etc/cni/net.d and /opt/cni/bin');
    expect(reason).toContain('/var/lib/rancher/k3s/agent/etc/cni/net.d');
    expect(calls.some((c) => c.startsWith('k3s crictl pull'))).toBe(false);
  });

  test('Cilium that does not replace kube-proxy', () => {
    const { reason } = failure('dp-cilium', { FAKE_KPR: 'False' }, ['verify_datapath']);
    expect(reason).toContain('Cilium does not replace kube-proxy');
  });

  test('kube-proxy rules left on a Cilium cell', () => {
    const { reason } = failure('dp-cilium', { FAKE_IPTABLES: '-A KUBE-SERVICES -j KUBE-SVC-ABC' }, [
      'verify_datapath',
    ]);
    expect(reason).toContain('kube-proxy rules on a Cilium cell: iptables-save has 1 KUBE-SVC line(s)');
  });

  test('an nftables cell whose kube-proxy programmed no nft table', () => {
    const { reason } = failure('dp-nftables', { FAKE_NFT_TABLE: '' }, ['verify_datapath']);
    expect(reason).toContain('datapath nftables: no nft table ip kube-proxy');
  });

  test('an iptables cell without kube-proxy chains', () => {
    const { reason } = failure('dp-iptables', { FAKE_IPTABLES: ':POSTROUTING ACCEPT [0:0]' }, [
      'verify_datapath',
    ]);
    expect(reason).toContain('datapath iptables: no KUBE-SERVICES chain');
  });

  test('a mesh cell whose injector does not answer', () => {
    const { reason } = failure('mesh', { FAKE_NO_INJECTOR: 'all' }, ['verify_mesh_injector']);
    expect(reason).toContain("istiod's injector did not answer: a dry-run pod in namespace mesh got");
  });

  test("a mesh cell whose injector leaves mesh-default's pods alone (E2's no-policy row out of the mesh)", () => {
    const { reason, log } = failure('mesh', { FAKE_NO_INJECTOR: 'mesh-default' }, ['verify_mesh_injector']);
    expect(log).toContain("istiod's injector adds istio-proxy to pods in mesh\n");
    expect(reason).toContain("istiod's injector did not answer: a dry-run pod in namespace mesh-default got");
  });
});

/**
 * The cell steps search a command's output with bash itself (steps/20-network-cell.sh), in place of
 * grep, grep -c, grep -m1 and sort -V: the same answers, from one bash process here.
 */
describe("the cell steps' own text helpers", () => {
  test('version_at_least orders as sort -V does, and the line helpers count and find as grep does', () => {
    const script = `set -euo pipefail
source steps/20-network-cell.sh
v() { if version_at_least "$1" "$2"; then echo "$1 >= $2"; else echo "$1 < $2"; fi; }
v 6.8.0 5.13; v 5.10.0 5.13; v 5.13 5.13; v 5.13.0 5.13; v 5.13 5.13.0; v 5.9 5.13; v 13.5 5.13
v 5.15.0+ 5.13; v 5.4.0+ 5.13
text=$'*nat\\n*\\n:KUBE-SERVICES - [0:0]\\n\\n-A KUBE-SERVICES -j KUBE-SVC-A\\n-A KUBE-SVC-A -j KUBE-SEP-B'
count_lines n "$text" '^-A KUBE-'; echo "rules $n"
count_lines n "$text" 'KUBE-SVC'; echo "svc $n"
count_lines n "$text" '^\\*$'; echo "star $n"
first_line l "$text" '^-A' && echo "first $l"
has_line "$text" '^KUBE' || echo "no ^KUBE"
[[ $- != *f* ]] && echo "globbing on"
`;
    // Run in the sources folder: a '*' line globbed would turn into its file names.
    const result = spawnSync('bash', ['-c', script], { cwd: BOOTSTRAP_SOURCES, encoding: 'utf8' });
    expect(result.stderr).toBe('');
    expect(result.stdout.trimEnd().split('\n')).toEqual([
      '6.8.0 >= 5.13',
      '5.10.0 < 5.13',
      '5.13 >= 5.13',
      '5.13.0 >= 5.13',
      // sort -V puts the shorter first when the fields it has are equal.
      '5.13 < 5.13.0',
      '5.9 < 5.13',
      '13.5 >= 5.13',
      // Not plain dotted numbers: sort -V itself answers.
      '5.15.0+ >= 5.13',
      '5.4.0+ < 5.13',
      'rules 2',
      'svc 2',
      'star 1',
      'first -A KUBE-SERVICES -j KUBE-SVC-A',
      'no ^KUBE',
      'globbing on',
    ]);
  });
});

/**
 * shellcheck's findings for a cell's settings.env, from one shellcheck run over every cell's file
 * (each file's findings are its own, as in a run of its own): a shellcheck start is about 0.1 s
 * of CPU, and each spawn from a worker that holds the lab's modules costs more.
 */
let settingsFindings: Map<string, string> | undefined;
function shellcheckSettings(name: string): string {
  if (!settingsFindings) {
    const dir = tempDir('lab-cell-settings-');
    const files = config.network.cells.map((cell) => {
      const file = join(dir, `${cell.name}.env`);
      writeFileSync(file, renderCellSettings(config, cell));
      return { name: cell.name, file };
    });
    const result = spawnSync('shellcheck', ['-s', 'bash', '-f', 'gcc', ...files.map((f) => f.file)], {
      encoding: 'utf8',
    });
    if (result.error) throw result.error;
    const lines = result.stdout.split('\n').filter((line) => line !== '');
    const ofFile = (file: string) => lines.filter((line) => line.startsWith(`${file}:`));
    // 0: clean, 1: findings, each naming its file; anything else is shellcheck's own failure.
    if (
      ![0, 1].includes(result.status ?? -1) ||
      files.reduce((n, f) => n + ofFile(f.file).length, 0) !== lines.length
    ) {
      throw new Error(`shellcheck exited ${result.status}: ${result.stdout}${result.stderr}`);
    }
    settingsFindings = new Map(files.map((f) => [f.name, ofFile(f.file).join('\n')]));
  }
  return settingsFindings.get(name) ?? '';
}

describe('cell settings and budgets', () => {
  test
    .runIf(needs(SHELLCHECK, import.meta.url, 'the shellcheck tests'))
    .each(config.network.cells.map((c) => c.name))('the settings of cell %s pass shellcheck', (name) => {
    expect(shellcheckSettings(name)).toBe('');
  });

  test('every network step has a bash function', () => {
    const defined = readdirSync(join(BOOTSTRAP_SOURCES, 'steps'))
      .flatMap((f) => [
        ...readFileSync(join(BOOTSTRAP_SOURCES, 'steps', f), 'utf8').matchAll(/^([a-z0-9_]+)\(\) \{/gm),
      ])
      .map((m) => m[1]);
    for (const name of NETWORK_STEP_NAMES) expect(defined).toContain(name);
  });

  test('the network steps fit the default ready timeout', () => {
    expect(networkMinimumReadyTimeoutMinutes()).toBeLessThanOrEqual(
      config.network.instance.readyTimeoutMinutes,
    );
  });

  test('only mesh cells wait for the injector', () => {
    const names = (cell: string) =>
      cellBootstrapSteps(config, cellByName(config.network, cell)).map((s) => s.name);
    expect(names('mesh')).toContain('verify_mesh_injector');
    expect(names('dp-cilium')).not.toContain('verify_mesh_injector');
  });

  test('each cell renders its own flags and results prefix', () => {
    const text = renderCellSettings(config, cellByName(config.network, 'dp-ipvs'));
    expect(text).toMatch(/^K3S_EXEC='.*--kube-proxy-arg=proxy-mode=ipvs'$/m);
    expect(text).toContain("RESULTS_SUBDIR='dp-ipvs/'");
    expect(text).toContain("DATAPATH='ipvs'");
  });
});
