import type { LabConfig } from './schema.ts';

/** The settings each lab reads; the other lab's sections keep their defaults and are not shown. */
const NETWORK_LAB_SECTIONS = ['lab', 'stackName', 'k3s', 'runner', 'network'] as const;

/** The configuration as `lab config` shows it: only the sections the selected lab uses. */
export function labSettings(config: LabConfig): Partial<LabConfig> {
  if (config.lab === 'network') {
    return Object.fromEntries(NETWORK_LAB_SECTIONS.map((key) => [key, config[key]])) as Partial<LabConfig>;
  }
  const { network: _other, ...llmGateway } = config;
  return llmGateway;
}

/**
 * For the CDK stack while the network lab's stack is being built (issue 15): a network-lab
 * configuration stops with what exists today instead of deploying the other lab. The manifests
 * (`cdk8s synth`) build the network lab's cells and do not call this.
 */
export function assertLlmGatewayLab(config: LabConfig, what: string): void {
  if (config.lab !== 'llm-gateway') {
    throw new LabNotAvailableError(
      `lab: network: this version cannot synthesize ${what} for the network lab yet (lab config validates its configuration); use lab: llm-gateway for the LLM-gateway lab`,
    );
  }
}

/** A valid configuration for something this version cannot synthesize yet. */
export class LabNotAvailableError extends Error {}
