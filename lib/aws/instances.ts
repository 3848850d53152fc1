/**
 * Facts about EC2 instance ids shared by the launch handler, `lab teardown` and the study
 * commands. Plain data: the Lambda bundle and the CLI both import it.
 */

/** An EC2 instance id (8 or 17 hex digits); anything else is a physical id of a failed create. */
export const INSTANCE_ID = /^i-[0-9a-f]{8,17}$/;

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
