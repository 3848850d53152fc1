import { GetParameterCommand } from '@aws-sdk/client-ssm';
import { awsErrorName } from '../aws-cli/errors.ts';
import { notChecked } from './errors.ts';
import type { DoctorHost } from './hosts.ts';
import { type CallerContext, type DoctorClients, type DoctorLine, lineOf } from './model.ts';

/**
 * The AMI lines: each public SSM parameter a launch template takes its image from resolves in the
 * region (CloudFormation resolves it at deploy time and fails the deploy naming it otherwise).
 */

const line = lineOf('ami');

/** Judges one parameter's value (undefined: the parameter does not exist). Pure. */
export function judgeAmi(
  parameter: string,
  hosts: readonly string[],
  value: string | undefined,
  caller: CallerContext,
): DoctorLine {
  const subject = `${parameter} (${hosts.join(', ')})`;
  if (value === undefined) {
    return line(
      'fail',
      subject,
      `no such parameter in ${caller.region}: the launch template's image cannot resolve`,
      "set the host's amiParameter (instance.amiParameter, network.instance.amiParameter) to a public AMI parameter this region has (aws ssm get-parameters-by-path --path /aws/service --recursive lists them)",
    );
  }
  if (!/^ami-[0-9a-f]+$/.test(value)) {
    return line(
      'fail',
      subject,
      `resolves to "${value}", not an AMI id`,
      'point amiParameter at a parameter holding an image id (ami-...)',
    );
  }
  return line('pass', subject, `resolves to ${value}`);
}

/** Reads each distinct parameter once. Reads only. */
export async function checkAmis(
  clients: DoctorClients,
  hosts: readonly DoctorHost[],
  caller: CallerContext,
): Promise<DoctorLine[]> {
  const byParameter = new Map<string, string[]>();
  for (const host of hosts)
    byParameter.set(host.amiParameter, [...(byParameter.get(host.amiParameter) ?? []), host.name]);
  const lines: DoctorLine[] = [];
  for (const [parameter, names] of byParameter) {
    try {
      const got = await clients.ssm.send(new GetParameterCommand({ Name: parameter }));
      lines.push(judgeAmi(parameter, names, got.Parameter?.Value ?? '', caller));
    } catch (error) {
      lines.push(
        awsErrorName(error) === 'ParameterNotFound'
          ? judgeAmi(parameter, names, undefined, caller)
          : notChecked('ami', `${parameter} (${names.join(', ')})`, 'ssm:GetParameter', error),
      );
    }
  }
  return lines;
}
