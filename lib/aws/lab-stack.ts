import { CfnOutput, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as s3 from 'aws-cdk-lib/aws-s3';
import type { Construct } from 'constructs';
import type { LabConfig } from '../config/schema.ts';

export interface LabStackProps extends StackProps {
  /** The lab configuration both synthesizers share. */
  readonly config: LabConfig;
}

/**
 * The testbed on AWS. So far it holds the results bucket; the GPU host, its launch with AZ
 * fallback and the bootstrap are added to this stack by the AWS testbed work.
 */
export class LabStack extends Stack {
  /** Where study results land; kept on `cdk destroy` so that destroying the lab keeps the data. */
  readonly resultsBucket: s3.Bucket;

  constructor(scope: Construct, id: string, props: LabStackProps) {
    super(scope, id, props);
    this.resultsBucket = new s3.Bucket(this, 'Results', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      versioned: true,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    new CfnOutput(this, 'ResultsBucketName', {
      value: this.resultsBucket.bucketName,
      description: 'Study results; retained on cdk destroy (delete with: aws s3 rb s3://<name> --force)',
    });
  }
}
