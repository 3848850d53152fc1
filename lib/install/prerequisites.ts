import type { PrerequisiteList } from '../prereqs/prerequisites.ts';
import { applyPrerequisite, type InstallDeps, minutes } from './apply.ts';

/**
 * `lab prereqs --apply`: only the prerequisites (CRDs, controllers) of one cluster, through the
 * same steps `lab install` runs before the lab's charts: a release asset applied server-side with
 * its CRDs waited Established, a Helm prerequisite checked by its release Secret (the lab does not
 * run Helm). The steps between the lab's own charts (`afterApply`) are not prerequisites of the
 * cluster: they are named, and `lab install` runs them.
 */
export async function installPrerequisites(list: PrerequisiteList, deps: InstallDeps): Promise<void> {
  const { api, write, clock } = deps;
  const started = clock.now().getTime();
  const version = await api.version();
  write(`cluster: context ${api.target.context} at ${api.target.server}, Kubernetes ${version}`);
  if (list.prerequisites.length === 0) {
    write('this configuration has no prerequisites: nothing to install first');
    return;
  }
  for (const prerequisite of list.prerequisites) await applyPrerequisite(prerequisite, deps);
  for (const step of list.afterApply) {
    write(
      `${step.id}: not run here: it belongs right after the lab's ${step.after}.yaml (lab install runs it)`,
    );
  }
  write(
    `${list.prerequisites.length} prerequisite(s) in place in ${minutes(clock.now().getTime() - started)}`,
  );
}
