/**
 * Pieces shared by the user-data launcher and the bootstrap script: host paths, the WaitCondition
 * signal's shape, and shell helpers. Both scripts are rendered from these so they agree.
 */

/** Every line the launcher and the bootstrap print goes here (docs/facts.md §2.2). */
export const BOOTSTRAP_LOG = '/var/log/lab-bootstrap.log';
/** Working folder of the bootstrap: the downloaded script, manifests, signal bodies, state. */
export const WORK_DIR = '/opt/lab';
/** Where the launcher unpacks the bootstrap folder asset (main.sh, settings.env, ...). */
/** The absolute deadline (UTC, ISO 8601), written once at first boot (by the launcher). */
export const DEADLINE_FILE = `${WORK_DIR}/deadline`;

export const BOOTSTRAP_DIR_ON_HOST = `${WORK_DIR}/bootstrap`;
/** Where the launcher unpacks the manifests asset; the bootstrap gets it as LAB_MANIFESTS_DIR. */
export const MANIFESTS_DIR = `${WORK_DIR}/manifests`;
/**
 * Created once a signal reached the WaitCondition, so the launcher does not signal a second time
 * after the bootstrap has already reported its own failure.
 */
export const SIGNALLED_MARKER = `${WORK_DIR}/signalled`;
/** The `UniqueId` of every signal: a later signal with the same id replaces an earlier one. */
export const SIGNAL_UNIQUE_ID = 'bootstrap';

/**
 * Environment variables the bootstrap reads (the launcher exports them). Everything else it
 * needs is rendered into the script from the lab configuration.
 */
export const BOOTSTRAP_ENVIRONMENT = [
  'WAIT_HANDLE_URL',
  'LAB_REGION',
  'LAB_RESULTS_BUCKET',
  'LAB_STACK_NAME',
  'LAB_MANIFESTS_DIR',
] as const;

/** A bash single-quoted word holding exactly `value`. */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/**
 * Bash function `json_string` of the launcher (the bootstrap has its own in sh/helpers.sh): prints
 * stdin as a JSON string literal. It keeps printable ASCII,
 * tabs and newlines only (a log tail may hold colour codes or cut UTF-8), so the signal body is
 * valid JSON whatever the log holds. Escaping at most doubles the length: callers cut the input.
 */
export const JSON_STRING_FUNCTION = `json_string() {
  local text
  text=$(LC_ALL=C tr -cd '\\11\\12\\40-\\176' | sed -e 's/\\\\/\\\\\\\\/g' -e 's/"/\\\\"/g' -e 's/\\t/\\\\t/g' |
    awk 'NR > 1 { printf "\\\\n" } { printf "%s", $0 }')
  printf '"%s"' "$text"
}`;

/**
 * The reference under which containerd stores an image pulled by its short name, as `ctr` needs
 * it (`vllm/vllm-openai:v0.11.0` -> `docker.io/vllm/vllm-openai:v0.11.0`).
 */
export function fullyQualifiedImage(image: string): string {
  const slash = image.indexOf('/');
  if (slash < 0) return `docker.io/library/${image}`;
  const host = image.slice(0, slash);
  if (host.includes('.') || host.includes(':') || host === 'localhost') return image;
  return `docker.io/${image}`;
}

/**
 * The launcher's PUT that signals the WaitCondition with the JSON in `bodyFile` (a shell word). An
 * empty Content-Type is what the presigned URL was signed for; the URL itself is never echoed.
 * `--fail` makes an HTTP error (403 from an expired or wrong URL) a failure, which
 * `--retry-all-errors` retries (curl 7.71 or later; Ubuntu 22.04 ships 7.81).
 */
export function signalCommand(bodyFile: string): string {
  return `curl -sS --fail --retry 5 --retry-all-errors --max-time 60 -X PUT -H 'Content-Type:' --data-binary @${bodyFile} "$WAIT_HANDLE_URL"`;
}
