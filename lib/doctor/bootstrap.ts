import { DescribeStacksCommand, type Stack } from '@aws-sdk/client-cloudformation';
import { GetParameterCommand } from '@aws-sdk/client-ssm';
import { awsErrorMessage, awsErrorName } from '../aws-cli/errors.ts';
import { notChecked } from './errors.ts';
import { type CallerContext, type DoctorClients, type DoctorLine, lineOf } from './model.ts';

/**
 * The CDK bootstrap line: the toolkit stack is there and healthy, and the version `cdk deploy`
 * reads (the SSM parameter of the bootstrap's qualifier) is recent enough for this aws-cdk-lib.
 */

/** What this project's aws-cdk-lib needs of the bootstrap (bootstrap-requirement.ts reads it). */
export interface BootstrapRequirement {
  /** The bootstrap stack: CDKToolkit unless `cdk bootstrap --toolkit-stack-name` chose another. */
  readonly toolkitStackName: string;
  readonly qualifier: string;
  /** `/cdk-bootstrap/<qualifier>/version`: the template's BootstrapVersion parameter reads it. */
  readonly versionParameter: string;
  /** Below this the synthesized template's CheckBootstrapVersion rule fails the deploy. */
  readonly deployVersion: number;
  /** Below this the lookup role cannot be used (the CLI falls back to the caller's credentials). */
  readonly lookupVersion: number;
  /** What the installed CDK CLI's `cdk bootstrap` would install; undefined when not known. */
  readonly cliTemplateVersion?: number;
}

/** What the account holds. */
export interface BootstrapFound {
  /** The toolkit stack, or undefined when there is none of that name. */
  readonly stack?: Pick<Stack, 'StackStatus' | 'Outputs'>;
  /** The version parameter's value, or undefined when there is no such parameter. */
  readonly parameter?: string;
}

const line = lineOf('bootstrap');

/** Statuses in which the toolkit stack cannot serve a deploy (a failed create, a delete). */
const BROKEN_STATUS = /(_FAILED|ROLLBACK_COMPLETE|DELETE_IN_PROGRESS|DELETE_COMPLETE)$/;

/** `cdk bootstrap` for this account and region, with the qualifier and stack name when not the defaults. */
export function bootstrapCommand(requirement: BootstrapRequirement, caller: CallerContext): string {
  const extra = [
    requirement.qualifier === 'hnb659fds' ? '' : ` --qualifier ${requirement.qualifier}`,
    requirement.toolkitStackName === 'CDKToolkit'
      ? ''
      : ` --toolkit-stack-name ${requirement.toolkitStackName}`,
  ].join('');
  return `npx cdk bootstrap aws://${caller.account}/${caller.region}${extra}`;
}

/** Judges what was found against what aws-cdk-lib needs. Pure. */
export function judgeBootstrap(
  found: BootstrapFound,
  requirement: BootstrapRequirement,
  caller: CallerContext,
): DoctorLine {
  const subject = `${requirement.toolkitStackName} (qualifier ${requirement.qualifier})`;
  const bootstrap = bootstrapCommand(requirement, caller);
  const status = found.stack?.StackStatus;
  if (status !== undefined && BROKEN_STATUS.test(status)) {
    return line(
      'fail',
      subject,
      `the bootstrap stack is ${status}`,
      `read its events (aws cloudformation describe-stack-events --stack-name ${requirement.toolkitStackName} --region ${caller.region}), delete it if it never completed, then run ${bootstrap}`,
    );
  }
  if (found.parameter === undefined) {
    return found.stack
      ? line(
          'fail',
          subject,
          `the stack exists but ${requirement.versionParameter} does not: it was bootstrapped with another qualifier`,
          `bootstrap with this one (${bootstrap}), or set the context @aws-cdk/core:bootstrapQualifier in cdk.json to the stack's qualifier`,
        )
      : line(
          'fail',
          subject,
          `${caller.region} of account ${caller.account} is not bootstrapped for CDK (no stack ${requirement.toolkitStackName}, no parameter ${requirement.versionParameter})`,
          bootstrap,
        );
  }
  const version = Number(found.parameter);
  if (!Number.isInteger(version)) {
    return line(
      'fail',
      subject,
      `${requirement.versionParameter} holds "${found.parameter}", not a version number`,
      `run ${bootstrap} to rewrite it`,
    );
  }
  const needs = `this aws-cdk-lib needs at least ${requirement.deployVersion} to deploy`;
  if (version < requirement.deployVersion) {
    return line(
      'fail',
      subject,
      `bootstrap version ${version}; ${needs} (the template's CheckBootstrapVersion rule would stop the deploy)`,
      `upgrade it: ${bootstrap}`,
    );
  }
  if (version < requirement.lookupVersion) {
    return line(
      'warn',
      subject,
      `bootstrap version ${version} deploys, but its lookup role needs ${requirement.lookupVersion}: the VPC's Availability Zone lookup would fall back to your own credentials`,
      `upgrade it: ${bootstrap}`,
    );
  }
  const cli = requirement.cliTemplateVersion;
  const stackNote = found.stack
    ? ''
    : `; no stack named ${requirement.toolkitStackName} (bootstrapped under another name?)`;
  if (cli !== undefined && version < cli) {
    return line(
      'warn',
      subject,
      `bootstrap version ${version} is enough (${needs}), older than the installed CDK CLI's ${cli}${stackNote}`,
      `optional: ${bootstrap} upgrades it`,
    );
  }
  return line(
    found.stack ? 'pass' : 'warn',
    subject,
    `bootstrap version ${version} (${needs}${cli === undefined ? '' : `; the CDK CLI's template is ${cli}`})${stackNote}`,
    ...(found.stack ? [] : [`pass --toolkit-stack-name with the stack cdk bootstrap made`]),
  );
}

/** Reads the toolkit stack and the version parameter, then judges them. Reads only. */
export async function checkBootstrap(
  clients: DoctorClients,
  requirement: BootstrapRequirement,
  caller: CallerContext,
): Promise<DoctorLine> {
  const subject = `${requirement.toolkitStackName} (qualifier ${requirement.qualifier})`;
  let stack: BootstrapFound['stack'];
  try {
    const described = await clients.cloudFormation.send(
      new DescribeStacksCommand({ StackName: requirement.toolkitStackName }),
    );
    stack = described.Stacks?.[0];
  } catch (error) {
    // CloudFormation says a missing stack with a ValidationError "Stack with id X does not exist".
    const missing =
      awsErrorName(error) === 'ValidationError' && /does not exist/.test(awsErrorMessage(error));
    if (!missing) return notChecked('bootstrap', subject, 'cloudformation:DescribeStacks', error);
  }
  let parameter: string | undefined;
  try {
    const got = await clients.ssm.send(new GetParameterCommand({ Name: requirement.versionParameter }));
    parameter = got.Parameter?.Value;
  } catch (error) {
    if (awsErrorName(error) !== 'ParameterNotFound') {
      // The stack's BootstrapVersion output duplicates the parameter (the bootstrap template says
      // so): judge by it when the parameter cannot be read, and say where the version came from.
      const output = stack?.Outputs?.find((o) => o.OutputKey === 'BootstrapVersion')?.OutputValue;
      const unread = notChecked('bootstrap', subject, 'ssm:GetParameter', error);
      if (output === undefined) return unread;
      const judged = judgeBootstrap({ ...(stack ? { stack } : {}), parameter: output }, requirement, caller);
      return {
        ...judged,
        message: `${judged.message} (from the stack's BootstrapVersion output: ${requirement.versionParameter} was not read, ${awsErrorName(error)})`,
      };
    }
  }
  return judgeBootstrap(
    { ...(stack ? { stack } : {}), ...(parameter === undefined ? {} : { parameter }) },
    requirement,
    caller,
  );
}
