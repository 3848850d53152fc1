/**
 * The failure reason CloudFormation shows for the capacity launch. A custom resource's whole
 * response body is at most 4096 bytes (CloudFormation User Guide, "Custom resource response
 * objects"), and the Provider framework puts its own text around the handler's message
 * (aws-cdk-lib custom-resources/lib/provider-framework/runtime/framework.js, `invokeUserFunction`
 * appends the log group; cfn-response.js, `safeHandler`, reports the error's stack), so a long EC2
 * message or a big table of Availability Zones pushes the useful text out. The reason is capped
 * here; the full text goes to the function's log.
 */

/** The most characters of a failure reason the handler hands to CloudFormation. */
export const REASON_LIMIT = 2000;

/** A cell of the attempt table: AZ | instance type | error code | message. */
interface TableRow {
  readonly az: string;
  readonly instanceType: string;
  readonly code: string;
  readonly message: string;
}

const TABLE_HEADER = /^\| AZ \| instance type \| error code \| message \|$/;
const SUMMARY_MESSAGE_LIMIT = 200;

function rowsOf(lines: readonly string[]): TableRow[] {
  return lines
    .filter((line) => line.startsWith('| ') && !line.startsWith('|---'))
    .map((line) => line.slice(2, -2).split(' | '))
    .filter((cells) => cells.length >= 4)
    .map(([az = '', instanceType = '', code = '', ...message]) => ({
      az,
      instanceType,
      code,
      message: message.join(' | '),
    }));
}

function shorten(text: string, limit: number): string {
  return text.length <= limit ? text : `${text.slice(0, limit - 1)}…`;
}

/**
 * The attempt table in a few lines: one per error code, with the places it happened and the
 * first message (shortened), most frequent code first.
 */
export function summarizeAttempts(rows: readonly TableRow[]): string[] {
  const byCode = new Map<string, TableRow[]>();
  for (const row of rows) byCode.set(row.code, [...(byCode.get(row.code) ?? []), row]);
  return [...byCode.entries()]
    .sort((a, b) => b[1].length - a[1].length)
    .map(([code, group]) => {
      const places = group.map((r) => `${r.az} (${r.instanceType})`).join(', ');
      return `- ${code} x${group.length}: ${places}. ${shorten(group[0]?.message ?? '', SUMMARY_MESSAGE_LIMIT)}`;
    });
}

/**
 * The reason for CloudFormation: the text itself when it fits; otherwise the attempt table (if
 * any) summarized by error code, and whatever is still too long cut, saying where the rest is.
 */
export function capFailureReason(text: string, limit = REASON_LIMIT): string {
  if (text.length <= limit) return text;
  const lines = text.split('\n');
  const header = lines.findIndex((line) => TABLE_HEADER.test(line));
  let shortened = text;
  if (header >= 0) {
    const tableEnd = lines.findIndex((line, i) => i > header && !line.startsWith('|'));
    const end = tableEnd < 0 ? lines.length : tableEnd;
    const rows = rowsOf(lines.slice(header + 1, end));
    shortened = [
      ...lines.slice(0, header),
      `${rows.length} attempts, by error code (the full table is in the launch function's log):`,
      ...summarizeAttempts(rows),
      ...lines.slice(end),
    ].join('\n');
  }
  if (shortened.length <= limit) return shortened;
  const note = "\n… (cut; the full text is in the launch function's log)";
  return `${shortened.slice(0, limit - note.length)}${note}`;
}

/**
 * The error as the Lambda runtime should report it: its stack cut to one line. The Node runtime
 * sends `trace: error.stack.split("\n")` with the error (aws-lambda-nodejs-runtime-interface-client,
 * src/Errors/index.ts `toRuntimeResponse`), and the Provider framework builds its FAILED reason
 * from the message and then `trace.slice(1)` (aws-cdk-lib 2.276.0, custom-resources/lib/
 * provider-framework/runtime/framework.js `invokeUserFunction`; cfn-response.js `safeHandler`
 * reports `e.stack`): a multi-line message's stack repeats every line after the first, which
 * doubles the reason. With one line of stack, the reason is the message and the log group's name.
 */
export function withOneLineStack<E extends Error>(error: E): E {
  const first = error.message.split('\n', 1)[0] ?? '';
  error.stack = `${error.name}: ${first}`;
  return error;
}

/**
 * Runs a handler step; a failure is logged in full and rethrown with its reason capped and its
 * stack one line, so that CloudFormation shows the cause and the log keeps every detail.
 */
export async function withCappedReason<T>(
  run: () => Promise<T>,
  log: (line: string) => void,
  limit = REASON_LIMIT,
): Promise<T> {
  try {
    return await run();
  } catch (error) {
    const text = error instanceof Error ? error.message : String(error);
    if (text.length <= limit) {
      throw withOneLineStack(error instanceof Error ? error : new Error(text));
    }
    log(`full failure reason (${text.length} characters):\n${text}`);
    const capped = new Error(capFailureReason(text, limit));
    capped.name = error instanceof Error ? error.name : 'Error';
    throw withOneLineStack(capped);
  }
}
