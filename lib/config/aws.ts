import { z } from 'zod';

/**
 * Settings of the AWS account the lab deploys into that the account itself decides, such as the
 * customer-managed KMS key a `cdk bootstrap --bootstrap-kms-key-id` put on the CDK asset bucket.
 */

/** A KMS key ARN (not an alias: IAM names keys by key ARN); multi-region keys have `mrk-` ids. */
export const KMS_KEY_ARN =
  /^arn:aws(-[a-z]+)*:kms:[a-z]{2}(-[a-z]+)+-\d:\d{12}:key\/(mrk-)?[0-9a-f-]{32,36}$/;

const EXAMPLE_ARN = 'arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';

const kmsKeyArn = z.string().refine((value) => KMS_KEY_ARN.test(value), {
  error: (issue) =>
    `${JSON.stringify(issue.input)} is not a KMS key ARN; give the key's ARN like ${EXAMPLE_ARN} (an alias or a bare key id is not accepted: IAM policies name keys by key ARN)`,
});

export const AwsSchema = z
  .strictObject({
    assetKeyArns: z
      .array(kmsKeyArn)
      .default([])
      .describe(
        "Customer-managed KMS keys of the CDK asset bucket (cdk bootstrap --bootstrap-kms-key-id): the hosts get kms:Decrypt on exactly these keys, through S3 only, to download their bootstrap; lab doctor names the key when the bootstrap uses one that is not listed. Empty: the bootstrap's default AWS managed key (or the key cdk bootstrap --bootstrap-customer-key creates), which needs no IAM statement",
      ),
  })
  .prefault({});
