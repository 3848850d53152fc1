export { type CheckOptions, type CheckReport, checkManifests, inspectManifests } from './check.ts';
export { formatNote, formatViolation, summarize } from './format.ts';
export { loadManifestFolder, loadManifests, type ManifestFolder, ManifestLoadError } from './load.ts';
export { fileOf, type KubeObject, rememberFile } from './manifest.ts';
export { AI_GATEWAY, BUDGET, type Note, SCHEMA, type Violation } from './violation.ts';
