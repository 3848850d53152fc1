/**
 * How the lab stack names a network-lab cell's constructs and outputs (lib/aws/lab-stack.ts
 * `addCellOutputs`). Kept apart from the stack, so the study commands read a cell's outputs
 * without loading aws-cdk-lib.
 */

/** `dp-cilium` -> `CellDpCilium`: construct ids and output names of a cell. */
export function cellConstructId(name: string): string {
  return `Cell${name
    .split('-')
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('')}`;
}

/** A cell's stack output: `CellDpCiliumInstanceId`. */
export function cellOutputKey(cell: string, output: string): string {
  return `${cellConstructId(cell)}${output}`;
}

/** The description every cell output starts with (`Cell dp-cilium: ...`), which names the cell. */
export function cellOutputDescription(cell: string, description: string): string {
  return `Cell ${cell}: ${description}`;
}

/** The cell an output belongs to, read back from its description; undefined for the stack's own. */
export function cellOfOutput(key: string | undefined, description: string | undefined): string | undefined {
  if (!key?.startsWith('Cell') || !description) return undefined;
  const cell = /^Cell ([a-z0-9-]+): /.exec(description)?.[1];
  return cell !== undefined && key.startsWith(cellConstructId(cell)) ? cell : undefined;
}
