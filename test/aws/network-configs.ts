import { parseLabConfig } from '../../lib/config/load.ts';
import type { LabConfig } from '../../lib/config/schema.ts';

/** The network-lab configurations the stack and quota tests share: a Cilium cell beside others. */

export type CellInput = { name: string; datapath: string; instanceType?: string };

/** The default-type Cilium cell. */
export const CILIUM_CELL: CellInput = { name: 'dp-cilium', datapath: 'cilium' };

/** An nftables cell of its own instance type. */
export const nftablesCell = (instanceType: string): CellInput => ({
  name: 'dp-nftables',
  datapath: 'nftables',
  instanceType,
});

/** The configuration input of a network lab named NetworkLab with these cells. */
export function networkLabInput(...cells: CellInput[]) {
  return { lab: 'network', stackName: 'NetworkLab', network: { cells } } as const;
}

/** A network lab named NetworkLab with these cells. */
export function networkLab(...cells: CellInput[]): LabConfig {
  return parseLabConfig(networkLabInput(...cells));
}
