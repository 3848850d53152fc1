/**
 * `node /probes/sse-server.mjs [--host 0.0.0.0] [--port 8080] [--events 200] [--interval-ms 20]
 *  [--streams 0] [--stall-after -1 --stall-ms 0]`
 * Serves SSE streams (experiment E7) until it has sent `--streams` streams (0: until SIGTERM),
 * then prints its SseServerResult as one JSON line.
 */
import { logLine, runProbe } from '../probe-main.ts';
import { SSE_PATH } from '../sse.ts';
import { startSseServer } from '../sse-net.ts';

const PROBE = 'sse-server';

runProbe(
  PROBE,
  {
    host: { kind: 'string', default: '0.0.0.0', description: 'address to listen on' },
    port: { kind: 'int', min: 0, max: 65535, default: 8080, description: 'TCP port; 0 picks a free one' },
    events: { kind: 'int', min: 1, max: 100_000, default: 200, description: 'events per stream' },
    'interval-ms': { kind: 'int', min: 1, max: 60_000, default: 20, description: 'ms between events' },
    streams: { kind: 'int', min: 0, default: 0, description: 'exit after this many streams (0: never)' },
    'stall-after': {
      kind: 'int',
      min: -1,
      default: -1,
      description: 'pause once after this event (-1: never)',
    },
    'stall-ms': { kind: 'int', min: 0, max: 600_000, default: 0, description: 'length of that pause' },
  },
  async (flags) => {
    const server = await startSseServer({
      host: flags.host,
      port: flags.port,
      plan: {
        events: flags.events,
        intervalMs: flags['interval-ms'],
        stallAfter: flags['stall-after'],
        stallMs: flags['stall-ms'],
      },
    });
    logLine(PROBE, `listening on ${flags.host}:${server.port}, streams at ${SSE_PATH}`);
    await new Promise<void>((resolve) => {
      process.once('SIGTERM', resolve);
      process.once('SIGINT', resolve);
      if (flags.streams > 0) server.onStreamDone((completed) => completed >= flags.streams && resolve());
    });
    return server.stop();
  },
);
