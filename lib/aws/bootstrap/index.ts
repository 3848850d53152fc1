export { minimumReadyTimeoutMinutes, STEP_NAMES, stepBudgetSeconds } from '../../facts/budgets.ts';
export {
  type BootstrapStep,
  bootstrapSteps,
  K3S_EXEC,
  lifetimeMinutes,
  RESULTS_SYNC_SCRIPT,
  renderSettings,
  replicaSets,
  SHAREGPT_URL,
  sharegptHostPath,
  writeBootstrapFolder,
} from './bootstrap.ts';
export { type LauncherInputs, renderLauncher, USER_DATA_LIMIT_BYTES } from './launcher.ts';
export {
  BOOTSTRAP_ENVIRONMENT,
  BOOTSTRAP_LOG,
  fullyQualifiedImage,
  MANIFESTS_DIR,
  SIGNAL_UNIQUE_ID,
  SIGNALLED_MARKER,
  WORK_DIR,
} from './shell.ts';
