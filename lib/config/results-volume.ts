import { z } from 'zod';
import { ResultsUploadSchema } from './results-upload.ts';

/**
 * Where the study runner keeps the results folder (lib/runner/layout.ts): the node folder of the
 * lab's own K3s host, which its bootstrap uploads, or a PersistentVolumeClaim on a cluster the
 * user brings, which `lab results` copies out through the Kubernetes API (docs/cluster.md).
 */

/** `node-folder`: host path /var/lib/lab/results of the runner's node; `claim`: a PersistentVolumeClaim. */
export const RESULTS_VOLUMES = ['node-folder', 'claim'] as const;
export type ResultsVolumeKind = (typeof RESULTS_VOLUMES)[number];

/** A DNS-1123 subdomain: what Kubernetes accepts as a StorageClass name. */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A binary-suffixed size a claim can request: `20Gi`, `500Mi`, `1Ti`. */
const CLAIM_SIZE = /^[1-9]\d*(Mi|Gi|Ti)$/;

export const ResultsVolumeSchema = z
  .strictObject({
    volume: z
      .enum(RESULTS_VOLUMES)
      .default('node-folder')
      .meta({
        description:
          "Where the results folder lives: node-folder (host path /var/lib/lab/results on the runner's node; the lab's own K3s host uploads it to the results bucket) or claim (a PersistentVolumeClaim, for a cluster you bring: lab install requires it, lab results copies it out through the Kubernetes API)",
        allowed: RESULTS_VOLUMES.join(', '),
      }),
    storageClassName: z
      .string()
      .max(253)
      .regex(DNS_SUBDOMAIN, 'must be a StorageClass name (a DNS-1123 subdomain: a-z, 0-9, "-", ".")')
      .nullable()
      .default(null)
      .meta({
        description:
          "volume claim: the claim's StorageClass; null: the cluster's default StorageClass (lab install checks that it exists)",
        allowed: 'StorageClass name, or null',
      }),
    size: z
      .string()
      .regex(CLAIM_SIZE, 'must be a size like "20Gi" (a whole number with Mi, Gi or Ti)')
      .default('20Gi')
      .meta({
        description:
          'volume claim: the storage the claim requests; a full study writes tens of MB (client JSON and logs per run)',
        allowed: 'whole number with Mi, Gi or Ti',
      }),
    upload: ResultsUploadSchema.nullable().default(null).meta({
      description:
        'volume claim: also copy the results to S3 while the study runs and at its end (EKS, with IRSA or Pod Identity; docs/cluster.md "Results to S3 on EKS"); null: no upload',
      allowed: '{ bucket, prefix, region, roleArn?, everySeconds?, image? }, or null',
    }),
  })
  .prefault({});

export type ResultsVolume = z.output<typeof ResultsVolumeSchema>;

/** The claim's name in the lab's namespace (charts/results-store.ts). */
export const RESULTS_CLAIM_NAME = 'lab-results';
