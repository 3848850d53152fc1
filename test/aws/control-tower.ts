import { CfnGuardValidator } from '@cdklabs/cdk-validator-cfnguard';
import type {
  IPolicyValidationContextBeta1,
  IPolicyValidationPluginBeta1,
  PolicyValidationPluginReportBeta1,
} from 'aws-cdk-lib';

/**
 * The AWS Control Tower proactive controls, run by cfn-guard, as a policy validation plugin whose
 * findings are errors.
 *
 * Why the wrapper: `CfnGuardValidator` (@cdklabs/cdk-validator-cfnguard 0.0.62, lib/plugin.js,
 * `execGuard`) reports violations without a `severity`. Once any finding of a report is
 * acknowledged, aws-cdk-lib 2.276.0 recomputes the report's success from the remaining
 * violations' severities (core/lib/private/synthesis-validation.js, `collectSuppressions`:
 * `violations.every(v => v.severity !== 'error' && v.severity !== 'fatal')`), so an
 * unacknowledged new finding without a severity would pass synth. Marking them errors keeps
 * every unacknowledged rule fatal.
 */
export class ControlTowerChecks implements IPolicyValidationPluginBeta1 {
  private readonly guard = new CfnGuardValidator();
  readonly name = this.guard.name;
  readonly version = this.guard.version;
  readonly ruleIds = this.guard.ruleIds;

  validate(context: IPolicyValidationContextBeta1): PolicyValidationPluginReportBeta1 {
    const report = this.guard.validate(context);
    return {
      ...report,
      violations: report.violations.map((violation) => ({
        ...violation,
        severity: violation.severity ?? 'error',
      })),
    };
  }
}
