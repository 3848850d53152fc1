/**
 * `node /probes/conntrack-driver.mjs [--host 127.0.0.1] [--port 0] [--connections 4000]
 *  [--connect-timeout-ms 5000] [--hold-ms 5000]`
 * Opens the connections at once (experiment E10), holds, closes, and prints its
 * ConntrackDriverResult as one JSON line. `--port 0` connects to its own loopback listener.
 */
import { runConntrackDriver } from '../conntrack-driver-net.ts';
import { runProbe } from '../probe-main.ts';

runProbe(
  'conntrack-driver',
  {
    host: { kind: 'string', default: '127.0.0.1', description: 'address to connect to' },
    port: { kind: 'int', min: 0, max: 65535, default: 0, description: 'port; 0: own loopback listener' },
    connections: { kind: 'int', min: 1, max: 1_000_000, default: 4000, description: 'connections at once' },
    'connect-timeout-ms': { kind: 'int', min: 1, default: 5000, description: 'limit of each connect' },
    'hold-ms': { kind: 'int', min: 0, default: 5000, description: 'hold the connections this long' },
  },
  (flags) =>
    runConntrackDriver({
      host: flags.host,
      port: flags.port,
      connections: flags.connections,
      connectTimeoutMs: flags['connect-timeout-ms'],
      holdMs: flags['hold-ms'],
    }),
);
