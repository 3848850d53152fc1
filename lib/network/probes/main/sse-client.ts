/**
 * `node /probes/sse-client.mjs --url http://sse.plain:8080/events [--expect-events 200]
 *  [--timeout-ms 60000]`
 * Reads one SSE stream (experiment E7) and prints its SseClientResult as one JSON line.
 */
import { runProbe } from '../probe-main.ts';
import { readSseStream } from '../sse-net.ts';

runProbe(
  'sse-client',
  {
    url: { kind: 'string', description: 'http:// URL of the stream' },
    'expect-events': {
      kind: 'int',
      min: 0,
      default: 0,
      description: 'events the stream must carry (0: any)',
    },
    'timeout-ms': { kind: 'int', min: 1, default: 60_000, description: 'the stream must end within this' },
  },
  (flags) =>
    readSseStream({ url: flags.url, expectedEvents: flags['expect-events'], timeoutMs: flags['timeout-ms'] }),
);
