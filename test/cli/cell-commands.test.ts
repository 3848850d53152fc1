import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { DescribeInstancesCommand } from '@aws-sdk/client-ec2';
import { GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { GetCommandInvocationCommand, SendCommandCommand } from '@aws-sdk/client-ssm';
import { allCustomMatcher } from 'aws-sdk-client-mock-vitest';
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it, vi } from 'vitest';
import { cellConstructId, cellOutputDescription, cellOutputKey } from '../../lib/aws/cell-outputs.ts';
import { runLab } from '../../lib/cli/program.ts';
import { defaultResultsDir } from '../../lib/cli/study-commands.ts';
import { renderStartStudy } from '../../lib/control/host-scripts.ts';
import { NETWORK_RUNNER_NAME } from '../../lib/network/topology.ts';
import { tempDir } from '../temp.ts';
import { BUCKET, cfn, deployed, ec2, labHost, liveHosts, STACK, s3, ssm } from './deployed-lab.ts';

import { body, COMMAND_ID, lab, NOW, STATUS, statusBlock, useDeployedLab } from './study-kit.ts';

expect.extend(allCustomMatcher);
useDeployedLab();

describe('a network-lab cell with --cell', () => {
  const NETWORK_STACK = 'NetworkLab';
  const CELL_INSTANCES: Record<string, string> = {
    mesh: 'i-0aaaaaaaaaaaaaaa1',
    'dp-iptables': 'i-0aaaaaaaaaaaaaaa2',
    'dp-cilium': 'i-0aaaaaaaaaaaaaaa3',
  };
  const NETWORK_CONFIG = ['--config', 'examples/network-lab.yaml'];

  /** The network stack's outputs as lib/aws/lab-stack.ts names and describes them, one host per cell. */
  function networkDeployed(cells = Object.keys(CELL_INSTANCES)) {
    liveHosts(
      ...cells.map((cell, i) =>
        labHost(
          CELL_INSTANCES[cell] ?? '',
          i === 0 ? 'c7i.4xlarge' : 'c7i.2xlarge',
          `${cellConstructId(cell)}LaunchC0FFEE1${i}`,
          new Date(NOW.getTime() - 1_800_000),
          NETWORK_STACK,
        ),
      ),
    );
    const outputs = cells.flatMap((cell) => [
      {
        OutputKey: cellOutputKey(cell, 'InstanceId'),
        OutputValue: CELL_INSTANCES[cell],
        Description: cellOutputDescription(cell, 'its host'),
      },
      {
        OutputKey: cellOutputKey(cell, 'ResultsLocation'),
        OutputValue: `s3://${BUCKET}/${NETWORK_STACK}/${cell}/`,
        Description: cellOutputDescription(cell, 'where the host syncs results'),
      },
    ]);
    cfn.on(DescribeStacksCommand, { StackName: NETWORK_STACK }).resolves({
      Stacks: [
        { StackName: NETWORK_STACK, StackStatus: 'CREATE_COMPLETE', CreationTime: NOW, Outputs: outputs },
      ],
    });
    for (const instance of Object.values(CELL_INSTANCES)) {
      ec2.on(DescribeInstancesCommand, { InstanceIds: [instance] }).resolves({
        Reservations: [
          { Instances: [{ InstanceId: instance, State: { Name: 'running' }, LaunchTime: NOW }] },
        ],
      });
    }
  }

  function cellAnswers(instance: string, stdout: string) {
    ssm.on(SendCommandCommand).resolves({ Command: { CommandId: COMMAND_ID } });
    ssm.on(GetCommandInvocationCommand, { CommandId: COMMAND_ID, InstanceId: instance }).resolves({
      Status: 'Success',
      ResponseCode: 0,
      StandardOutputContent: stdout,
      StandardErrorContent: '',
    });
  }

  it('lab status reads the cell host, priced by network.instance', async () => {
    networkDeployed();
    cellAnswers(CELL_INSTANCES['dp-cilium'], `runner job: active\n${statusBlock(STATUS)}`);
    const run = await lab(...NETWORK_CONFIG, 'status', '--cell', 'dp-cilium');
    expect(run.code, run.stderr).toBe(0);
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, {
      InstanceIds: [CELL_INSTANCES['dp-cilium']],
      Comment: 'lab status: progress of NetworkLab cell dp-cilium',
    });
    expect(run.stdout).toContain(
      `study on ${CELL_INSTANCES['dp-cilium']} (stack NetworkLab cell dp-cilium), runner job: active`,
    );
    expect(run.stdout).toContain('at 0.357 USD/h');
    // Every cell's host, each at its own type's price.
    expect(run.stdout).toContain('hosts:     3 live, 1.43 USD/h on demand together, about 0.71 USD so far');
    expect(run.stdout).toContain(
      `  CellMesh: ${CELL_INSTANCES.mesh} c7i.4xlarge in us-west-2a, running, up 30m00s, 0.71 USD/h, about 0.36 USD so far`,
    );
  });

  it('lab run starts the study on the cell host and says how to watch that cell', async () => {
    networkDeployed();
    cellAnswers(CELL_INSTANCES.mesh, 'runner job: active\n--- no status.json\n');
    const run = await lab(...NETWORK_CONFIG, 'run', '--cell', 'mesh', '--region', 'us-west-2');
    expect(run.code, run.stderr).toBe(0);
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, { InstanceIds: [CELL_INSTANCES.mesh] });
    expect(run.stdout).toContain(`stack NetworkLab cell mesh: instance ${CELL_INSTANCES.mesh} in us-west-2`);
    expect(run.stdout).toContain('watch it: lab status --stack NetworkLab --cell mesh');
  });

  it("lab run --smoke --cell asks that cell's runner for its smoke study", async () => {
    networkDeployed();
    cellAnswers(CELL_INSTANCES.mesh, 'runner job: absent\n--- no status.json\n');
    const run = await lab(...NETWORK_CONFIG, 'run', '--smoke', '--cell', 'mesh', '--region', 'us-west-2');
    expect(run.code, run.stderr).toBe(0);
    const networkJob = { namespace: 'plain', name: NETWORK_RUNNER_NAME };
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, {
      InstanceIds: [CELL_INSTANCES.mesh],
      Parameters: { commands: renderStartStudy(networkJob, { smoke: true }), executionTimeout: ['300'] },
    });
    expect(renderStartStudy(networkJob, { smoke: true })).toContain(
      "  date -u +%FT%TZ > '/var/lib/lab/results/smoke.request'",
    );
  });

  it('lab results downloads the cell prefix <stack>/<cell>/ into ./results/<stack>/<cell> by default', async () => {
    networkDeployed();
    cellAnswers(CELL_INSTANCES['dp-iptables'], 'uploaded\n');
    const prefix = `${NETWORK_STACK}/dp-iptables/`;
    s3.on(ListObjectsV2Command, { Bucket: BUCKET, Prefix: prefix }).resolves({
      IsTruncated: false,
      Contents: [{ Key: `${prefix}status.json`, Size: 20, LastModified: NOW, ETag: '"s"' }],
    });
    s3.on(GetObjectCommand, { Bucket: BUCKET, Key: `${prefix}status.json` }).resolves({
      Body: body('{"state":"finished"}'),
      LastModified: NOW,
    });
    const out = join(tempDir('lab-results-'), 'cell');
    const run = await lab('results', '--stack', NETWORK_STACK, '--cell', 'dp-iptables', '--out', out);
    expect(run.code, run.stderr).toBe(0);
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, {
      InstanceIds: [CELL_INSTANCES['dp-iptables']],
    });
    expect(readFileSync(join(out, 'status.json'), 'utf8')).toBe('{"state":"finished"}');
    expect(defaultResultsDir(NETWORK_STACK, 'dp-iptables')).toBe('./results/NetworkLab/dp-iptables');
    expect(defaultResultsDir(STACK)).toBe(`./results/${STACK}`);
  });

  it('a network configuration without --cell, or with a cell it lacks, stops before any AWS call', async () => {
    const none = await lab(...NETWORK_CONFIG, 'status');
    expect(none.code).toBe(1);
    expect(none.stderr).toBe(
      'lab status: the network lab has one host per cell: name one with --cell (cells: mesh, dp-iptables, dp-cilium)\n',
    );
    const unknown = await lab(...NETWORK_CONFIG, 'run', '--cell', 'dp-nft');
    expect(unknown.stderr).toBe(
      'lab run: --cell dp-nft: no such cell in network.cells (cells: mesh, dp-iptables, dp-cilium)\n',
    );
    const llm = await lab('status', '--cell', 'mesh');
    expect(llm.stderr).toContain('lab status: --cell mesh: cells belong to the network lab');
    expect(cfn).not.toHaveReceivedCommand(DescribeStacksCommand);
  });

  it('lab logs takes --cell: without it a network configuration names its cells; GPU-lab logs are refused', async () => {
    const none = await lab(...NETWORK_CONFIG, 'logs', 'runner');
    expect(none.code).toBe(1);
    expect(none.stderr).toBe(
      'lab logs: the network lab has one host per cell: name one with --cell (cells: mesh, dp-iptables, dp-cilium)\n',
    );
    const replica = await lab(...NETWORK_CONFIG, 'logs', 'replica', '0', '--cell', 'mesh');
    expect(replica.code).toBe(1);
    expect(replica.stderr).toContain(
      '"replica" is a log of the LLM-gateway lab; a network-lab cell has: bootstrap, runner, pod (with --namespace plain, mesh or mesh-default; default plain).',
    );
    // A cell without a mesh has only the plain namespace.
    const plainCell = await lab(...NETWORK_CONFIG, 'logs', 'job', 'x', '--cell', 'dp-iptables');
    expect(plainCell.stderr).toContain('pod (with --namespace plain; default plain).');
    expect(cfn).not.toHaveReceivedCommand(DescribeStacksCommand);
  });

  it("lab logs pod names the mesh cell's other test-pod namespaces when the pod is not there", async () => {
    networkDeployed();
    ssm.on(SendCommandCommand).resolves({ Command: { CommandId: COMMAND_ID } });
    ssm.on(GetCommandInvocationCommand, { CommandId: COMMAND_ID }).resolves({
      Status: 'Failed',
      ResponseCode: 7,
      StandardOutputContent: '',
      StandardErrorContent: 'pods in mesh: fortio-7d9f8-1\n',
    });
    const run = await lab(
      ...NETWORK_CONFIG,
      'logs',
      'pod',
      'fortio-x',
      '--cell',
      'mesh',
      '--namespace',
      'mesh',
    );
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      "pods in mesh: fortio-7d9f8-1 The cell's other test pods are in plain or mesh-default (--namespace).",
    );
  });

  it("lab logs --cell reads the cell's host", async () => {
    networkDeployed();
    cellAnswers(CELL_INSTANCES['dp-iptables'], 'runner line\n');
    const run = await lab(...NETWORK_CONFIG, 'logs', 'runner', '--cell', 'dp-iptables');
    // Aimed at the cell's instance (the fake host's answer is not a log, which is beside the point).
    expect(run.stderr).toContain(`the study runner's log on instance ${CELL_INSTANCES['dp-iptables']}`);
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, {
      InstanceIds: [CELL_INSTANCES['dp-iptables']],
    });
  });

  it('with --stack only, the stack outputs name the cells', async () => {
    networkDeployed(['mesh', 'dp-cilium']);
    const none = await lab('results', '--stack', NETWORK_STACK, '--region', 'us-west-2');
    expect(none.code).toBe(1);
    expect(none.stderr).toContain(
      'Stack NetworkLab in us-west-2 is a network lab with one host per cell: name the cell with --cell (lab run, status, results; cells: mesh, dp-cilium).',
    );
    const unknown = await lab(
      'results',
      '--stack',
      NETWORK_STACK,
      '--region',
      'us-west-2',
      '--cell',
      'dp-iptables',
    );
    expect(unknown.stderr).toContain(
      'Stack NetworkLab in us-west-2 has no cell dp-iptables: its cells are mesh, dp-cilium.',
    );
    deployed();
    const gpu = await lab('results', '--stack', STACK, '--region', 'us-west-2', '--cell', 'mesh');
    expect(gpu.stderr).toContain(
      `Stack ${STACK} in us-west-2 has no cell mesh: it is an LLM-gateway lab (one GPU host): leave out --cell.`,
    );
    expect(ssm).not.toHaveReceivedCommand(SendCommandCommand);
  });
});

it('lab registers run, status and results', async () => {
  let help = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    help += String(chunk);
    return true;
  });
  try {
    await runLab(['--help']);
  } finally {
    out.mockRestore();
  }
  expect(help).toMatch(/^ {2}run \[options\] /m);
  expect(help).toMatch(/^ {2}status \[options\] /m);
  expect(help).toMatch(/^ {2}results \[options\] /m);
});
