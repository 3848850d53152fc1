import { z } from 'zod';
import { pinnedImage } from './fields.ts';

/**
 * `runner.results.upload`: on a cluster the user brings (EKS), an optional copy of the results
 * claim to S3 while the study runs and once at its end (charts/results-upload.ts). The lab's own
 * AWS host uploads its node folder with its own bootstrap; this is only for `volume: claim`.
 */

/**
 * The AWS CLI v2 image the uploader runs: a version tag of the official ECR Public repository
 * (docs/facts.md §6.3).
 */
export const RESULTS_UPLOAD_IMAGE = 'public.ecr.aws/aws-cli/aws-cli:2.27.22';

/** S3 general purpose bucket names: 3-63 of a-z, 0-9, "." and "-", a letter or digit at each end. */
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const IPV4 = /^\d+\.\d+\.\d+\.\d+$/;

/** A commercial, China, GovCloud or ISO region code: `eu-west-1`, `us-gov-west-1`, `cn-north-1`. */
const REGION = /^[a-z]{2}(-[a-z]+)+-\d{1,2}$/;

/** An IAM role ARN in any partition, with an optional path. */
const ROLE_ARN = /^arn:aws(-[a-z]+)*:iam::\d{12}:role\/[\w+=,.@/-]{1,512}$/;

/** An S3 key prefix without a leading or trailing "/" and without empty segments. */
const PREFIX = /^[A-Za-z0-9!_.*'()-]+(\/[A-Za-z0-9!_.*'()-]+)*$/;

/** Why `name` is not an S3 bucket name, or undefined when it is. */
export function bucketNameProblem(name: string): string | undefined {
  if (!BUCKET.test(name))
    return 'must be an S3 bucket name: 3 to 63 characters of a-z, 0-9, "." and "-", starting and ending with a letter or digit';
  if (name.includes('..')) return 'must not contain two adjacent periods';
  if (IPV4.test(name)) return 'must not be formatted as an IP address';
  return undefined;
}

export const ResultsUploadSchema = z
  .strictObject({
    bucket: z
      .string()
      .superRefine((name, ctx) => {
        const problem = bucketNameProblem(name);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      })
      .meta({ description: 'The S3 bucket the results go to', allowed: 'S3 bucket name' }),
    prefix: z
      .string()
      .regex(PREFIX, 'must be an S3 key prefix like "studies/lab-1": no leading, trailing or double "/"')
      .meta({
        description: 'The folder in the bucket: the results land under s3://<bucket>/<prefix>/',
        allowed: 'key prefix without leading or trailing "/"',
      }),
    region: z
      .string()
      .regex(REGION, 'must be an AWS region code like "eu-west-1"')
      .meta({ description: "The bucket's AWS region", allowed: 'region code, e.g. eu-west-1' }),
    roleArn: z
      .string()
      .regex(ROLE_ARN, 'must be an IAM role ARN like "arn:aws:iam::123456789012:role/lab-results"')
      .nullable()
      .default(null)
      .meta({
        description:
          "IRSA: the role the runner's ServiceAccount is annotated with (eks.amazonaws.com/role-arn); null: EKS Pod Identity, whose association you make outside the cluster",
        allowed: 'IAM role ARN, or null',
      }),
    everySeconds: z.number().int().min(10).max(3600).default(60).meta({
      description: 'Seconds between two syncs while the study runs (one more sync when it ends)',
      allowed: '10 to 3600',
    }),
    image: pinnedImage('The AWS CLI v2 image the uploader runs').default(RESULTS_UPLOAD_IMAGE),
  })
  .meta({ description: 'Copy the results claim to S3 while the study runs and at its end' });

export type ResultsUpload = z.output<typeof ResultsUploadSchema>;
