/**
 * Facts about EC2 instance ids shared by the launch handler, `lab teardown` and the study
 * commands. Plain data: the Lambda bundle and the CLI both import it.
 */

/** An EC2 instance id (8 or 17 hex digits); anything else is a physical id of a failed create. */
export const INSTANCE_ID = /^i-[0-9a-f]{8,17}$/;

/**
 * States of an instance that still exists and can run or bill again; terminated and shutting-down
 * ones are gone. `lab doctor`, `lab status` and `lab teardown` list these.
 */
export const LIVE_STATES: readonly string[] = ['pending', 'running', 'stopping', 'stopped'];

/** EC2 error codes that mean the instance does not exist (any more). */
export const INSTANCE_GONE_CODES: ReadonlySet<string> = new Set([
  'InvalidInstanceID.NotFound',
  'InvalidInstanceID.Malformed',
]);

/** Whether an SDK error says the instance does not exist. */
export function isInstanceGone(error: unknown): boolean {
  const name = (error as { name?: unknown } | null)?.name;
  return typeof name === 'string' && INSTANCE_GONE_CODES.has(name);
}

/** An On-Demand vCPU quota of EC2: its name in Service Quotas and, when known, its code. */
export interface OnDemandQuota {
  readonly name: string;
  readonly code?: string;
}

/** The On-Demand vCPU quota an instance type counts against, by its family letters. */
export function onDemandQuotaFor(instanceType: string): OnDemandQuota {
  const family = instanceType.split('.')[0] ?? '';
  if (/^(g|vt)\d/.test(family)) return { name: 'Running On-Demand G and VT instances', code: 'L-DB2E81BA' };
  if (/^p\d/.test(family)) return { name: 'Running On-Demand P instances', code: 'L-417A185B' };
  if (/^inf\d/.test(family)) return { name: 'Running On-Demand Inf instances' };
  if (/^trn\d/.test(family)) return { name: 'Running On-Demand Trn instances' };
  if (/^dl\d/.test(family)) return { name: 'Running On-Demand DL instances' };
  if (/^f\d/.test(family)) return { name: 'Running On-Demand F instances' };
  if (/^x\d/.test(family)) return { name: 'Running On-Demand X instances' };
  if (/^u/.test(family)) return { name: 'Running On-Demand High Memory instances' };
  return {
    name: 'Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances',
    code: 'L-1216C47A',
  };
}
