/** Words for the socket error codes the probes meet, so messages say what happened. Pure. */
const WORDS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by peer',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ENOTFOUND: 'host name not found',
  EAI_AGAIN: 'host name lookup failed (temporary)',
  EMFILE: 'too many open files in this process',
  ENFILE: 'too many open files on the system',
  EADDRNOTAVAIL: 'no local address/port available',
  EPIPE: 'broken pipe',
};

/** The code of a Node system error (`ECONNREFUSED`...), or undefined for other errors. */
export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** "connection refused (ECONNREFUSED)", or the error's own message when its code is unknown. */
export function describeNetError(error: unknown): string {
  const code = errorCode(error);
  if (code !== undefined && code in WORDS) return `${WORDS[code]} (${code})`;
  return error instanceof Error ? error.message : String(error);
}
