import { join } from 'node:path';
import { describe, it } from 'vitest';
import { clusterNodes, clusterPricePerHourUsd } from '../../lib/config/cluster.ts';
import { defaultLabConfig, loadLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import { cpuText, resourceBudget } from '../../lib/study/resources.ts';
import { DEFAULT_SIMULATION_MODEL } from '../../lib/study/simulator.ts';
import { REPO_ROOT } from '../../scripts/examples.ts';
import { expectQuoted } from './page-text.ts';

/**
 * Figures the pages quote in their prose (not an output block, so npm run docs:examples cannot
 * rewrite them) that the lab computes from its configuration: each is recomputed here, and a
 * change of a default or a price fails naming the page and the sentence to update.
 * docs/first-run.md's figures from `lab plan` are test/docs/first-run-figures.test.ts's.
 */

const usd = (n: number, digits = 2) => n.toFixed(digits);
const example = (file: string) => loadLabConfig({ file: join(REPO_ROOT, file), env: {} }).config;

describe('costs the pages derive from the configuration', () => {
  const config = defaultLabConfig();
  const price = config.instance.pricePerHourUsd;
  const worst = config.instance.maxLifetimeHours * price;

  it('the GPU host: its price and what the cost guard bounds', () => {
    expectQuoted('README.md', `about ${usd(price)} USD an hour on demand`);
    expectQuoted(
      'README.md',
      `(${config.instance.maxLifetimeHours} by default: at most about ${Math.round(worst)} USD`,
    );
    expectQuoted('docs/aws-testbed.md', `about ${usd(price)} USD per hour for the default`);
    expectQuoted(
      'docs/aws-testbed.md',
      `(default ${config.instance.maxLifetimeHours} hours: at most about ${Math.round(worst)} USD`,
    );
    expectQuoted(
      'docs/first-run.md',
      `(default ${config.instance.maxLifetimeHours} hours, at most about ${Math.round(worst)} USD)`,
    );
  });

  it('the network lab: a cell and the three default cells', () => {
    const network = example('examples/network-lab.yaml');
    const cell = network.network.instance.pricePerHourUsd;
    expectQuoted('README.md', `(\`c7i.2xlarge\`, ${cell} USD an hour each)`);
    expectQuoted(
      'docs/network-lab.md',
      `${cell} USD on demand for c7i.2xlarge in us-west-2, so about ${usd(network.network.cells.length * cell)} USD an hour for the three default cells`,
    );
  });

  it('the multi-node example: each host type and the sum', () => {
    const multi = example('examples/multi-node.yaml');
    const nodes = clusterNodes(multi);
    const of = (type: string) => nodes.find((n) => n.instanceType === type)?.pricePerHourUsd ?? Number.NaN;
    expectQuoted(
      'docs/aws-testbed.md',
      `about ${usd(of('g6.12xlarge'))} USD/hour, \`g6.xlarge\` ${usd(0.805)}, \`c7i.4xlarge\` ${usd(of('c7i.4xlarge'))}`,
    );
    expectQuoted(
      'docs/aws-testbed.md',
      `The example is about ${usd(clusterPricePerHourUsd(nodes), 1)} USD/hour`,
    );
  });
});

describe('docs/study.md: the resource budget with every optional arm', () => {
  it('is what validation sums', () => {
    const config = parseLabConfig({ study: { optionalArms: ['epp-prefix3', 'ai-gateway', 'llmd-precise'] } });
    const budget = resourceBudget(config);
    expectQuoted(
      'docs/study.md',
      `with every optional arm the lab asks for ${cpuText(budget.cpuMillis)} of the ${config.instance.type}'s ${config.instance.vcpus} vCPUs and ${(budget.memoryMiB / 1024).toFixed(1)} of its ${config.instance.memoryGiB} GiB`,
    );
  });
});

describe('docs/plan.md: the simulator’s tunables', () => {
  it('are DEFAULT_SIMULATION_MODEL’s', () => {
    const m = DEFAULT_SIMULATION_MODEL;
    const n = (x: number) => Number(x.toPrecision(3));
    const k = (x: number) => x.toLocaleString('en-US');
    expectQuoted(
      'docs/plan.md',
      `usable KV fraction (${m.kvCacheUsableFraction}), reserved blocks (${m.reservedBlocks}), step token budget (${k(m.maxNumBatchedTokens)}), KV bytes per token (${k(m.kvBytesPerToken)} for Qwen3-0.6B)`,
    );
    expectQuoted('docs/plan.md', `admissions within a ${k(m.maxNumBatchedTokens)}-token budget`);
    expectQuoted(
      'docs/plan.md',
      `step overhead (${n(m.stepOverheadMs)} ms), memory bandwidth (${n(m.memoryBandwidthGBps)} GB/s), prefill cost per token (${n(m.prefillMsPerToken)} ms), and the API server's time per request (${n(m.frontEndMsPerRequest)} ms) and per streamed token (${n(m.frontEndMsPerOutputToken)} ms)`,
    );
  });
});
