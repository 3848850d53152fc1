/**
 * Prints the `lab doctor` examples of docs/first-run.md (the real command against the fake account
 * of test/doctor/docs-example.ts) and docs/cluster.md (`--kubeconfig` against the fake cluster of
 * test/doctor/cluster-example.ts), or with --write puts them into the pages.
 *
 * Run: npx tsx scripts/doctor-example.ts [--write]
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  clusterExampleBlock,
  runClusterExample,
  withClusterExample,
} from '../test/doctor/cluster-example.ts';
import { exampleBlock, runExample, withExample } from '../test/doctor/docs-example.ts';

const PAGE = fileURLToPath(new URL('../docs/first-run.md', import.meta.url));
const CLUSTER_PAGE = fileURLToPath(new URL('../docs/cluster.md', import.meta.url));
const { code, stdout } = await runExample();
const block = exampleBlock(stdout, code);
const cluster = await runClusterExample();
const clusterBlock = clusterExampleBlock(cluster.stdout, cluster.code);
if (process.argv.includes('--write')) {
  writeFileSync(PAGE, withExample(readFileSync(PAGE, 'utf8'), block));
  process.stdout.write('docs/first-run.md: lab doctor example updated\n');
  writeFileSync(CLUSTER_PAGE, withClusterExample(readFileSync(CLUSTER_PAGE, 'utf8'), clusterBlock));
  process.stdout.write('docs/cluster.md: lab doctor --kubeconfig example updated\n');
} else {
  process.stdout.write(`${block}\n\n${clusterBlock}\n`);
}
