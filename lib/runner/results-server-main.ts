import { createServer } from 'node:http';
import { RESULTS_SERVER_PORT, resultsHandler } from './results-server.ts';
import { RUNNER_RESULTS_MOUNT } from './runner-files.ts';

/** The results server's entry in its pod (charts/results-store.ts), bundled into its ConfigMap. */
const root = process.env.LAB_RESULTS_DIR ?? RUNNER_RESULTS_MOUNT;
const listenPort = Number(process.env.LAB_RESULTS_PORT ?? RESULTS_SERVER_PORT);
createServer(resultsHandler(root)).listen(listenPort, () => {
  console.log(`lab results server: ${root} on port ${listenPort}, read-only`);
});
