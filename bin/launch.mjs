/**
 * Starts the `lab` command line fast. tsx transforms TypeScript on the fly, but its module hooks
 * cost about a quarter of a second at start and more for every module loaded after (zod alone has
 * 95). So the first run bundles bin/lab.ts and the lab's own modules with esbuild (a dependency of
 * the lab) into a cache under node_modules/.cache, one chunk per lazily loaded command, packages
 * left as imports; later runs import that bundle with plain Node as long as every source file it
 * came from is unchanged (same size and modification time). Any problem with the bundle falls back
 * to tsx, which is always right, only slower. LAB_CLI_BUNDLE=off skips the bundle.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** Raise when the build options change: every cached bundle is then rebuilt. */
const BUILD_VERSION = 1;
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const entry = join(root, 'bin', 'lab.ts');
// Under the repository's node_modules, so the bundle's package imports resolve as the sources' do;
// one folder per checkout, since worktrees may share node_modules.
const cacheDir = join(
  root,
  'node_modules',
  '.cache',
  'llm-gateway-lab',
  createHash('sha256').update(root).digest('hex').slice(0, 12),
);
const manifestFile = join(cacheDir, 'manifest.json');

/** [path relative to the root, size, mtimeMs] of a source file, or undefined when it is gone. */
function fingerprint(file) {
  try {
    const stat = statSync(join(root, file));
    return [file, stat.size, stat.mtimeMs];
  } catch {
    return undefined;
  }
}

/** The cached bundle's entry when it matches every source it was built from. */
function cachedEntry() {
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(manifestFile, 'utf8'));
  } catch {
    return undefined;
  }
  if (manifest.version !== BUILD_VERSION || !Array.isArray(manifest.inputs)) return undefined;
  const unchanged = manifest.inputs.every(([file, size, mtimeMs]) => {
    const now = fingerprint(file);
    return now !== undefined && now[1] === size && now[2] === mtimeMs;
  });
  return unchanged ? join(cacheDir, manifest.entry) : undefined;
}

/**
 * Bundled code would see the bundle's import.meta.url; each source that reads its own gets its
 * real URL written in instead (lib/runner/bundle.ts, the CDK constructs' handler paths).
 */
const ownImportMetaUrl = {
  name: 'own-import-meta-url',
  setup(build) {
    build.onLoad({ filter: /\.[cm]?ts$/ }, (args) => {
      const text = readFileSync(args.path, 'utf8');
      if (!text.includes('import.meta.url')) return undefined;
      const url = JSON.stringify(pathToFileURL(args.path).href);
      return { contents: text.replaceAll('import.meta.url', url), loader: 'ts' };
    });
  },
};

/** Builds the bundle into a folder of its own and points the manifest at it; returns its entry. */
async function buildBundle() {
  const { build } = await import('esbuild');
  const started = Date.now();
  const outdir = join(cacheDir, `${started.toString(36)}-${process.pid}`);
  const result = await build({
    absWorkingDir: root,
    entryPoints: [entry],
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    outExtension: { '.js': '.mjs' },
    sourcemap: 'linked',
    metafile: true,
    logLevel: 'silent',
    plugins: [ownImportMetaUrl],
  });
  const inputs = Object.keys(result.metafile.inputs).map(fingerprint);
  const entryFile = join(outdir, 'lab.mjs');
  // A source saved while this built may not be in the bundle: use it this once, cache nothing.
  if (inputs.some((input) => input === undefined || input[2] > started)) return entryFile;
  const manifest = { version: BUILD_VERSION, entry: relative(cacheDir, entryFile), inputs };
  const partial = `${manifestFile}.${process.pid}`;
  writeFileSync(partial, JSON.stringify(manifest));
  renameSync(partial, manifestFile);
  removeOldBuilds(outdir);
  return entryFile;
}

/** Older bundles, once nothing can be starting from them any more (an hour). */
function removeOldBuilds(current) {
  for (const name of readdirSync(cacheDir)) {
    const path = join(cacheDir, name);
    if (path === current || name === 'manifest.json') continue;
    try {
      if (Date.now() - statSync(path).mtimeMs > 3_600_000) rmSync(path, { recursive: true, force: true });
    } catch {
      // Another lab process removed it first.
    }
  }
}

async function bundleEntry() {
  if (process.env.LAB_CLI_BUNDLE === 'off') return undefined;
  try {
    const cached = cachedEntry();
    if (cached) return cached;
    mkdirSync(cacheDir, { recursive: true });
    return await buildBundle();
  } catch {
    return undefined;
  }
}

const bundled = await bundleEntry();
if (bundled) {
  await import(pathToFileURL(bundled).href);
} else {
  await import('./register-tsx.mjs');
  await import(pathToFileURL(entry).href);
}
