import { z } from 'zod';

/** Field builders shared by both labs' settings: one wording of each rule and its message. */

export const MAX_LIFETIME_HOURS = 72;

export const count = (description: string) => z.number().int().positive().describe(description);

/** A DNS-1123 label: what Kubernetes accepts as a namespace or object name. */
export const dnsLabel = (description: string) =>
  z
    .string()
    .max(63)
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a DNS-1123 label: lowercase letters, digits and "-"')
    .meta({ description, allowed: 'DNS-1123 label (a-z, 0-9, "-"; at most 63)' });

/**
 * A container image pinned by tag (or digest). Floating tags would make two runs of the "same"
 * study use different software.
 */
export const pinnedImage = (description: string) =>
  z
    .string()
    .superRefine((image, ctx) => {
      const problem = imageTagProblem(image);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    })
    .meta({ description, allowed: 'image pinned by version tag or digest; no latest' });

/** Why an image reference is not pinned, or undefined when it is. */
export function imageTagProblem(image: string): string | undefined {
  if (/@sha256:[0-9a-f]{64}$/.test(image)) return undefined;
  const lastSegment = image.slice(image.lastIndexOf('/') + 1);
  const colon = lastSegment.lastIndexOf(':');
  if (colon < 0 || colon === lastSegment.length - 1) {
    return 'has no tag; pin a version tag (e.g. "repo/image:v1.2.3") or a digest';
  }
  const tag = lastSegment.slice(colon + 1);
  if (tag === 'latest' || tag.endsWith('-latest')) {
    return `uses the floating tag "${tag}"; pin a version tag or a digest`;
  }
  return undefined;
}
