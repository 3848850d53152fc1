import type { LabConfig } from './schema.ts';

/** The settings each lab reads; the other lab's sections keep their defaults and are not shown. */
const NETWORK_LAB_SECTIONS = ['lab', 'stackName', 'aws', 'k3s', 'runner', 'network'] as const;

/** The configuration as `lab config` shows it: only the sections the selected lab uses. */
export function labSettings(config: LabConfig): Partial<LabConfig> {
  if (config.lab === 'network') {
    return Object.fromEntries(NETWORK_LAB_SECTIONS.map((key) => [key, config[key]])) as Partial<LabConfig>;
  }
  const { network: _other, ...llmGateway } = config;
  return llmGateway;
}
