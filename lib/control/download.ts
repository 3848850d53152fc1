import { mkdir, rename, stat, utimes, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { type _Object, GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { awsErrorName } from '../aws-cli/errors.ts';
import { type ControlContext, type ControlErrorKind, controlError } from './context.ts';
import type { Testbed } from './testbed.ts';

/** One object of the results prefix and where it goes on disk. */
export interface ResultObject {
  readonly key: string;
  /** Relative to the output folder, with `/`. */
  readonly path: string;
  readonly size: number;
  readonly lastModified: Date;
}

export interface DownloadSummary {
  readonly fetched: readonly ResultObject[];
  readonly unchanged: readonly ResultObject[];
  readonly bytesFetched: number;
}

/** Every object under `prefix`, all pages of ListObjectsV2; folder placeholders left out. */
export async function listResults(
  ctx: ControlContext,
  bucket: string,
  prefix: string,
): Promise<ResultObject[]> {
  const objects: ResultObject[] = [];
  let token: string | undefined;
  do {
    const page = await ctx.clients.s3
      .send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }))
      .catch((error: unknown) => {
        throw bucketError(ctx, error, 's3:ListBucket', bucket);
      });
    for (const object of page.Contents ?? []) {
      const entry = toResultObject(object, prefix);
      if (entry) objects.push(entry);
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return objects;
}

function toResultObject(object: _Object, prefix: string): ResultObject | undefined {
  const key = object.Key;
  if (!key?.startsWith(prefix) || key.endsWith('/')) return undefined;
  return {
    key,
    path: key.slice(prefix.length),
    size: object.Size ?? 0,
    lastModified: object.LastModified ?? new Date(0),
  };
}

export function bucketError(ctx: ControlContext, error: unknown, action: string, bucket: string) {
  if (awsErrorName(error) === 'NoSuchBucket') {
    return controlError(
      'no-results',
      `The results bucket ${bucket} of stack ${ctx.stackName} does not exist any more (deleted by hand?).`,
      error,
    );
  }
  return ctx.errors.explainAwsError(error, action, ctx);
}

/** Where an object goes under `outDir`; a key that would leave the folder is refused. */
export function localPath(outDir: string, path: string): string {
  const target = resolve(outDir, path);
  const inside = relative(resolve(outDir), target);
  if (inside === '' || inside.startsWith('..') || isAbsolute(inside)) {
    throw controlError('aws', `Refusing to write results object ${path} outside ${outDir}`);
  }
  return target;
}

/**
 * Unchanged means the same size and the same modification time as the object's LastModified:
 * every file this downloads gets its object's LastModified as mtime (as `aws s3 sync` does), so a
 * second download skips what the host has not uploaded again.
 */
async function isUnchanged(file: string, object: ResultObject): Promise<boolean> {
  try {
    const local = await stat(file);
    return (
      local.isFile() &&
      local.size === object.size &&
      Math.floor(local.mtimeMs / 1000) === Math.floor(object.lastModified.getTime() / 1000)
    );
  } catch {
    return false;
  }
}

/** Downloads every object under `prefix` that is new or changed into `outDir`. */
export async function downloadResults(
  ctx: ControlContext,
  bucket: string,
  prefix: string,
  outDir: string,
  onFile: (object: ResultObject, fetched: boolean) => void = () => {},
): Promise<DownloadSummary> {
  const objects = await listResults(ctx, bucket, prefix);
  const fetched: ResultObject[] = [];
  const unchanged: ResultObject[] = [];
  let bytesFetched = 0;
  for (const object of objects) {
    const file = localPath(outDir, object.path);
    if (await isUnchanged(file, object)) {
      unchanged.push(object);
      onFile(object, false);
      continue;
    }
    const response = await ctx.clients.s3
      .send(new GetObjectCommand({ Bucket: bucket, Key: object.key }))
      .catch((error: unknown) => {
        throw bucketError(ctx, error, 's3:GetObject', bucket);
      });
    if (!response.Body) throw controlError('aws', `s3:GetObject returned no body for ${object.key}`);
    const bytes = await response.Body.transformToByteArray();
    await mkdir(dirname(file), { recursive: true });
    // Written aside and renamed: an interrupted download never leaves a file that looks complete.
    const partial = join(dirname(file), `.${object.path.split('/').pop()}.part`);
    await writeFile(partial, bytes);
    const modified = response.LastModified ?? object.lastModified;
    await utimes(partial, modified, modified);
    await rename(partial, file);
    fetched.push({ ...object, size: bytes.byteLength, lastModified: modified });
    bytesFetched += bytes.byteLength;
    onFile(object, true);
  }
  return { fetched, unchanged, bytesFetched };
}

/** `1.2 MB`, `530 B`. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

/** A results file as the host last synced it to S3: its text and when it was uploaded. */
export interface SyncedCopy {
  readonly key: string;
  readonly text: string;
  readonly synced: Date | undefined;
}

/**
 * Reads the last synced copy of a results file (the instance is gone or not running). A missing
 * object becomes a `kind` error that says `why` and what its absence means.
 */
export async function readSyncedCopy(
  ctx: ControlContext,
  testbed: Pick<Testbed, 'bucket' | 'prefix'>,
  name: string,
  missing: { readonly kind: ControlErrorKind; readonly meaning: string; readonly why: string },
): Promise<SyncedCopy> {
  const key = `${testbed.prefix}${name}`;
  try {
    const response = await ctx.clients.s3.send(new GetObjectCommand({ Bucket: testbed.bucket, Key: key }));
    return { key, text: (await response.Body?.transformToString()) ?? '', synced: response.LastModified };
  } catch (error) {
    if (awsErrorName(error) === 'NoSuchKey') {
      throw controlError(
        missing.kind,
        `${missing.why}, and s3://${testbed.bucket}/${key} does not exist: ${missing.meaning}`,
        error,
      );
    }
    throw bucketError(ctx, error, 's3:GetObject', testbed.bucket);
  }
}

/** The line that says which copy the command shows. */
export function syncedCopyLine(testbed: Pick<Testbed, 'bucket'>, copy: SyncedCopy): string {
  return `This is the last synced copy: s3://${testbed.bucket}/${copy.key}, uploaded ${copy.synced ? copy.synced.toISOString() : 'at an unknown time'}.`;
}
