import { z } from 'zod';
import { count, MAX_LIFETIME_HOURS } from './fields.ts';

/** What differs between the hosts of the two labs: the GPU host and a network-lab cell. */
export interface InstanceDefaults {
  readonly type: string;
  /** Who the host is, in descriptions: `GPU host`, `network-lab cell`. */
  readonly role: string;
  readonly gpus: number;
  readonly gpusNote: string;
  readonly vcpus: number;
  /** The On-Demand quota the vCPUs count against. */
  readonly quota: string;
  readonly memoryGiB: number;
  readonly pricePerHourUsd: number;
  readonly amiParameter: string;
  readonly amiNote: string;
  readonly rootVolumeGiB: number;
  readonly minRootVolumeGiB: number;
  readonly rootVolumeNote: string;
}

/** The EC2 host of a lab: type, size, AMI, volume, lifetime and where to launch it. */
export function instanceSchema(d: InstanceDefaults) {
  return z
    .strictObject({
      type: z.string().min(1).default(d.type).describe(`EC2 instance type of the ${d.role}`),
      gpus: z
        .number()
        .int()
        .nonnegative()
        .describe(`GPUs of the instance type (${d.gpusNote})`)
        .default(d.gpus),
      vcpus: count(`vCPUs of the instance type; the ${d.quota} quota must allow this many`).default(d.vcpus),
      memoryGiB: count('Memory (GiB) of the instance type; the pods of the lab must fit in it').default(
        d.memoryGiB,
      ),
      pricePerHourUsd: z
        .number()
        .positive()
        .default(d.pricePerHourUsd)
        .describe('On-demand price per hour, for cost estimates (us-west-2)'),
      amiParameter: z.string().startsWith('/').default(d.amiParameter).describe(d.amiNote),
      rootVolumeGiB: z
        .number()
        .int()
        .min(d.minRootVolumeGiB)
        .max(16384)
        .default(d.rootVolumeGiB)
        .describe(d.rootVolumeNote),
      maxLifetimeHours: z
        .number()
        .positive(`must be more than 0 and at most ${MAX_LIFETIME_HOURS} hours`)
        .max(MAX_LIFETIME_HOURS, `must be more than 0 and at most ${MAX_LIFETIME_HOURS} hours`)
        .default(8)
        .describe('The instance shuts itself down (and terminates) after this many hours'),
      readyTimeoutMinutes: z
        .number()
        .int()
        .min(10)
        .max(720)
        .default(45)
        .describe(
          "How long cdk deploy waits for the bootstrap to report the testbed usable; at least the bootstrap's step budgets plus boot (45 for the GPU host, 53 with agents; a cell's own sum), which validation names",
        ),
      fallbackTypes: z
        .array(z.string().min(1))
        .default([])
        .describe(
          'Instance types tried in order when the primary type has no capacity in any AZ (off by default)',
        ),
      preferredAzs: z
        .array(
          z
            .string()
            .regex(/^[a-z]{2}(-[a-z]+)+-\d[a-z]$/, 'must be an Availability Zone name like us-west-2a'),
        )
        .default([])
        .describe('Availability Zones tried first, in order; the others that offer the type follow'),
    })
    .prefault({});
}
