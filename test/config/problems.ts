import { parseLabConfig } from '../../lib/config/load.ts';
import { LabConfigError } from '../../lib/config/problems.ts';

/** The problem lines a configuration gets, as the CLI prints them (without the bullet). */
export function problems(overrides: unknown): string[] {
  try {
    parseLabConfig(overrides, 'test.yaml');
  } catch (error) {
    if (error instanceof LabConfigError) return error.problems.map((p) => `${p.setting}: ${p.message}`);
    throw error;
  }
  return [];
}
