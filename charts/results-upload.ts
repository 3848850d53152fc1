import type { k8s } from 'cdk8s-plus-34';
import type { ResultsUpload } from '../lib/config/results-upload.ts';
import type { LabConfig } from '../lib/config/schema.ts';
import { RUNNER_RESULTS_MOUNT } from '../lib/runner/runner-files.ts';
import { REQUESTS } from '../lib/study/resources.ts';
import { containerResources, envVars, quantity, RESULTS_READER_SECURITY } from './common.ts';

/**
 * `runner.results.upload` (lib/config/results-upload.ts): a native sidecar of the runner's pod
 * (an init container with restartPolicy Always, docs/facts.md §6.4) that syncs the results claim
 * to S3 every few seconds and once more when the runner has finished and the kubelet stops it.
 * Credentials come from the AWS CLI's default chain: IRSA's or Pod Identity's variables, which
 * EKS injects into init containers too (docs/facts.md §6.2).
 */

/** The IRSA annotation of a ServiceAccount (docs/facts.md §6.2). */
export const IRSA_ROLE_ANNOTATION = 'eks.amazonaws.com/role-arn';

/** The sidecar's name in the runner's pod. */
export const RESULTS_UPLOADER_NAME = 'results-upload';

/** Where the sidecar's AWS CLI may write (its home: the CLI's caches); the root stays read-only. */
const SCRATCH = '/tmp';

/**
 * The sync loop, a POSIX shell script run with `sh -c`. A failed sync is logged and retried at
 * the next tick; SIGTERM (the kubelet stopping the sidecar after the runner exits) interrupts the
 * wait and runs one last sync. It exits 0 even when that fails: the files stay on the claim,
 * where `lab results` reads them, and a failed upload must not fail the study's Job.
 */
export const RESULTS_SYNC_SCRIPT = `set -u
target="s3://$LAB_UPLOAD_BUCKET/$LAB_UPLOAD_PREFIX/"
sync() {
  aws s3 sync "$LAB_UPLOAD_SOURCE" "$target" --region "$LAB_UPLOAD_REGION" --only-show-errors
}
finish() {
  trap - TERM INT
  if [ -n "\${sleeper:-}" ]; then kill "$sleeper" 2>/dev/null; fi
  if sync; then
    echo "results-upload: final sync to $target done"
  else
    echo "results-upload: final sync to $target failed (exit $?); the results stay on the claim (lab results)" >&2
  fi
  exit 0
}
trap finish TERM INT
echo "results-upload: syncing $LAB_UPLOAD_SOURCE to $target every $LAB_UPLOAD_EVERY s"
while true; do
  if sync; then :; else
    echo "results-upload: sync to $target failed (exit $?); retrying in $LAB_UPLOAD_EVERY s" >&2
  fi
  sleep "$LAB_UPLOAD_EVERY" &
  sleeper=$!
  wait "$sleeper"
  sleeper=
done
`;

/** The upload settings, when the results claim is copied to S3. */
export function resultsUpload(config: LabConfig): ResultsUpload | null {
  const { volume, upload } = config.runner.results;
  return volume === 'claim' ? upload : null;
}

/** The runner ServiceAccount's annotations: IRSA's role, when one is set. */
export function runnerAccountAnnotations(config: LabConfig): Record<string, string> | undefined {
  const roleArn = resultsUpload(config)?.roleArn;
  return roleArn ? { [IRSA_ROLE_ANNOTATION]: roleArn } : undefined;
}

/** The sidecar and its scratch volume (named `upload-scratch`), for the runner's pod. */
export function resultsUploader(upload: ResultsUpload): { container: k8s.Container; volume: k8s.Volume } {
  return {
    container: {
      name: RESULTS_UPLOADER_NAME,
      image: upload.image,
      // A native sidecar: started before the runner, stopped after it, not holding the Job open.
      restartPolicy: 'Always',
      command: ['/bin/sh', '-c', RESULTS_SYNC_SCRIPT],
      env: envVars({
        HOME: SCRATCH,
        LAB_UPLOAD_SOURCE: RUNNER_RESULTS_MOUNT,
        LAB_UPLOAD_BUCKET: upload.bucket,
        LAB_UPLOAD_PREFIX: upload.prefix,
        LAB_UPLOAD_REGION: upload.region,
        LAB_UPLOAD_EVERY: String(upload.everySeconds),
      }),
      resources: containerResources(REQUESTS.resultsUpload),
      securityContext: RESULTS_READER_SECURITY,
      volumeMounts: [
        { name: 'results', mountPath: RUNNER_RESULTS_MOUNT, readOnly: true },
        { name: 'upload-scratch', mountPath: SCRATCH },
      ],
    },
    volume: { name: 'upload-scratch', emptyDir: { sizeLimit: quantity('64Mi') } },
  };
}

/**
 * Seconds the runner's pod gets to stop: the sidecar's last sync runs within them (Kubernetes'
 * default of 30 is short for a study's files).
 */
export const UPLOAD_GRACE_SECONDS = 300;
