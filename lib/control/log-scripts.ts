import { shellQuote } from '../aws/bootstrap/shell.ts';
import { HOST_EXIT, preamble } from './host-scripts.ts';

/**
 * The bash scripts of `lab logs`, sent through SSM Run Command like the other study commands'.
 * Run Command keeps at most 24,000 characters of a script's stdout (lib/control/run-command.ts),
 * so each script prints at most LOG_CHUNK_BYTES of log after one marker line, and `--follow`
 * asks again for what came after. The scripts read whole files or a kubectl output file rather
 * than cutting a pipe short: under `set -o pipefail` a writer killed by SIGPIPE fails the script.
 */

/** Log bytes per answer: under Run Command's 24,000-character cap with room for the marker. */
export const LOG_CHUNK_BYTES = 20_000;

/** First line of a file log answer: `--- log <offset>`, the byte offset the next poll starts from. */
export const FILE_LOG_MARKER = '--- log ';
/** First line of a pod log answer. */
export const POD_LOG_MARKER = '--- log';

/** A log file on the host, from its last `tailLines` lines (`from` undefined) or from a byte offset. */
export interface FileLogRequest {
  readonly file: string;
  readonly tailLines: number;
  readonly from?: number;
}

export function renderFileLog(request: FileLogRequest): string[] {
  return [
    ...preamble(`Prints ${request.file}`),
    `readonly LOG_FILE=${shellQuote(request.file)}`,
    `readonly FROM=${request.from ?? -1}`,
    `readonly TAIL_LINES=${request.tailLines}`,
    `readonly MAX_BYTES=${LOG_CHUNK_BYTES}`,
    'if [ ! -f "$LOG_FILE" ]; then',
    '  echo "$LOG_FILE does not exist on this host" >&2',
    `  exit ${HOST_EXIT.noLogFile}`,
    'fi',
    // One size for the whole answer: the file may grow while this runs.
    'size=$(stat -c %s "$LOG_FILE")',
    'from=$FROM',
    // A file shorter than the offset was replaced: start again from its beginning.
    'if [ "$from" -gt "$size" ]; then from=0; fi',
    'if [ "$from" -lt 0 ]; then',
    `  echo "${FILE_LOG_MARKER}$size"`,
    '  head -c "$size" "$LOG_FILE" | tail -n "$TAIL_LINES" | tail -c "$MAX_BYTES"',
    'else',
    '  end=$size',
    '  if [ $((end - from)) -gt "$MAX_BYTES" ]; then end=$((from + MAX_BYTES)); fi',
    `  echo "${FILE_LOG_MARKER}$end"`,
    '  head -c "$end" "$LOG_FILE" | tail -c "+$((from + 1))"',
    'fi',
  ];
}

/** A pod's log through `kubectl logs`: a pod, or a Deployment's or Job's pod (`job/bench-x`). */
export interface PodLogRequest {
  readonly namespace: string;
  /** What kubectl names: `pod/qwen3-0`, `deployment/vllm-router-x`, `job/bench-y`. */
  readonly target: string;
  readonly container?: string;
  readonly previous?: boolean;
  readonly tailLines: number;
  /** RFC 3339 in whole seconds: only lines from then on (a `--follow` poll). */
  readonly since?: string;
}

/**
 * kubectl logs with `--timestamps`, so that `--follow` can ask for the lines since the last one it
 * printed and drop the ones it has seen. A target that does not exist exits HOST_EXIT.noPod with
 * the namespace's pods on stderr.
 */
export function renderPodLog(request: PodLogRequest): string[] {
  const args = [
    '--timestamps',
    ...(request.container ? [`--container=${shellQuote(request.container)}`] : []),
    ...(request.previous ? ['--previous'] : []),
    request.since ? `--since-time=${shellQuote(request.since)}` : `--tail=${request.tailLines}`,
  ];
  return [
    ...preamble(`Prints the log of ${request.target}`),
    `readonly NAMESPACE=${shellQuote(request.namespace)}`,
    `readonly TARGET=${shellQuote(request.target)}`,
    `readonly MAX_BYTES=${LOG_CHUNK_BYTES}`,
    'found=$(kubectl -n "$NAMESPACE" get "$TARGET" --ignore-not-found -o name)',
    'if [ -z "$found" ]; then',
    `  pods=$(kubectl -n "$NAMESPACE" get pods -o 'jsonpath={.items[*].metadata.name}' 2>/dev/null || true)`,
    `  echo "pods in $NAMESPACE: \${pods:-(none)}" >&2`,
    `  exit ${HOST_EXIT.noPod}`,
    'fi',
    'out=$(mktemp)',
    `trap 'rm -f "$out"' EXIT`,
    `kubectl -n "$NAMESPACE" logs "$TARGET" ${args.join(' ')} >"$out"`,
    `echo ${shellQuote(POD_LOG_MARKER)}`,
    // The newest lines when tailing, the oldest when following (the next poll asks for the rest).
    request.since ? 'head -c "$MAX_BYTES" "$out"' : 'tail -c "$MAX_BYTES" "$out"',
  ];
}

/** A file log answer: the offset to continue from and the text after the marker line. */
export function parseFileLog(stdout: string): { readonly next: number; readonly text: string } | undefined {
  if (!stdout.startsWith(FILE_LOG_MARKER)) return undefined;
  const newline = stdout.indexOf('\n');
  const next = Number(stdout.slice(FILE_LOG_MARKER.length, newline < 0 ? undefined : newline));
  if (!Number.isInteger(next) || next < 0) return undefined;
  return { next, text: newline < 0 ? '' : stdout.slice(newline + 1) };
}

/** A pod log answer: the text after the marker line. */
export function parsePodLog(stdout: string): string | undefined {
  if (stdout !== POD_LOG_MARKER && !stdout.startsWith(`${POD_LOG_MARKER}\n`)) return undefined;
  return stdout.slice(POD_LOG_MARKER.length + 1);
}
