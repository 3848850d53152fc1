// Loads tsx (its `--import` entry, tsx/dist/loader.mjs) resolved from this file, not from the
// caller's working folder: `node --import tsx` resolves the package from the cwd, which fails when
// `lab` runs outside the repository (npx --prefix, a symlink on PATH).
import 'tsx';
