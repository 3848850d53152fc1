import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { EC2Client } from '@aws-sdk/client-ec2';
import { IAMClient } from '@aws-sdk/client-iam';
import { S3Client } from '@aws-sdk/client-s3';
import { ServiceQuotasClient } from '@aws-sdk/client-service-quotas';
import { SSMClient } from '@aws-sdk/client-ssm';
import { STSClient } from '@aws-sdk/client-sts';
import type { ControlClients } from '../control/context.ts';
import type { DoctorClients } from '../doctor/model.ts';
import type { TeardownClients } from '../teardown/plan.ts';
import { quietSdkNodeWarning } from './node-support.ts';

/**
 * The real AWS SDK v3 clients of the commands that call AWS, with the standard credential chain
 * and `region` (`undefined`: the SDK's own resolution). This module loads the SDK, so the commands
 * import it only when they run: `lab --help` and `lab config` need not wait for it.
 */

function clientConfig(region: string | undefined) {
  quietSdkNodeWarning();
  return region ? { region } : {};
}

/** For `lab run`, `lab status`, `lab results`, `lab logs`. */
export function sdkControlClients(region: string | undefined): ControlClients {
  const config = clientConfig(region);
  return {
    cloudFormation: new CloudFormationClient(config),
    ec2: new EC2Client(config),
    ssm: new SSMClient(config),
    s3: new S3Client(config),
  };
}

/** For `lab teardown`. */
export function sdkTeardownClients(region: string | undefined): TeardownClients {
  const config = clientConfig(region);
  return {
    cloudFormation: new CloudFormationClient(config),
    iam: new IAMClient(config),
    ec2: new EC2Client(config),
  };
}

/** For `lab doctor`: read-only calls only. */
export function sdkDoctorClients(region: string | undefined): DoctorClients {
  const config = clientConfig(region);
  return {
    sts: new STSClient(config),
    cloudFormation: new CloudFormationClient(config),
    ssm: new SSMClient(config),
    ec2: new EC2Client(config),
    serviceQuotas: new ServiceQuotasClient(config),
    iam: new IAMClient(config),
  };
}
