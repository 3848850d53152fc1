import { clusterProblems } from './cluster.ts';
import { crossCheck } from './rules.ts';
import { LabConfigFieldsSchema } from './schema.ts';

/**
 * The lab's configuration as it is validated: every setting's own rules (schema.ts) and the rules
 * that relate settings (rules.ts, cluster.ts). Cross-field rules run even when a field failed its
 * own schema, so every problem shows at once.
 */
export const LabConfigSchema = LabConfigFieldsSchema.superRefine(
  (config, ctx) => {
    crossCheck(config, ctx);
    for (const { path, message, input } of clusterProblems(config))
      ctx.addIssue({ code: 'custom', path, message, input });
  },
  { when: () => true },
);
