import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import {
  ApiException,
  CoreV1Api,
  KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  Log,
  PatchStrategy,
  VersionApi,
} from '@kubernetes/client-node';
import {
  type AccessQuestion,
  type AccessSubject,
  type ClusterApi,
  KubeApiError,
  type KubeObject,
  LAB_FIELD_MANAGER,
  type ObjectRef,
  type UrlAccessQuestion,
} from './cluster-api.ts';

/** Which cluster: the usual kubectl rules (`--kubeconfig`, else `$KUBECONFIG`, else ~/.kube/config). */
export interface KubeTarget {
  readonly kubeconfig?: string;
  readonly context?: string;
}

/** The kubeconfig files kubectl would read, or undefined when there are none. */
export function kubeconfigFiles(target: KubeTarget, env = process.env, home = homedir()): string[] {
  if (target.kubeconfig) return [target.kubeconfig];
  const fromEnv = (env.KUBECONFIG ?? '').split(delimiter).filter((file) => file.length > 0);
  if (fromEnv.length > 0) return fromEnv;
  const standard = join(home, '.kube', 'config');
  return existsSync(standard) ? [standard] : [];
}

/**
 * Loads the kubeconfig and selects the context; every problem is a `kubeconfig` error that says
 * which file and what to do. (client-node's loadFromDefault would silently fall back to
 * localhost:8080 when there is no file at all.)
 */
export function loadKubeConfig(target: KubeTarget, env = process.env, home = homedir()): KubeConfig {
  const files = kubeconfigFiles(target, env, home);
  if (files.length === 0) {
    throw new KubeApiError(
      'kubeconfig',
      'no kubeconfig: pass --kubeconfig <file>, set KUBECONFIG, or create ~/.kube/config (for EKS: aws eks update-kubeconfig --name <cluster>)',
    );
  }
  const kc = new KubeConfig();
  for (const [index, file] of files.entries()) {
    if (!existsSync(file)) {
      throw new KubeApiError('kubeconfig', `kubeconfig ${file} does not exist`);
    }
    try {
      if (index === 0) kc.loadFromFile(file);
      else {
        const more = new KubeConfig();
        more.loadFromFile(file);
        kc.mergeConfig(more);
      }
    } catch (error) {
      throw new KubeApiError(
        'kubeconfig',
        // The YAML parser adds a snippet of the file below its first line: one line is enough.
        `kubeconfig ${file} cannot be read: ${messageOf(error).split('\n')[0]}`,
        undefined,
        {
          cause: error,
        },
      );
    }
  }
  const contexts = kc.getContexts().map((c) => c.name);
  if (target.context) {
    if (!contexts.includes(target.context)) {
      throw new KubeApiError(
        'kubeconfig',
        `--context ${target.context}: no such context in ${files.join(', ')} (contexts: ${contexts.join(', ') || 'none'})`,
      );
    }
    kc.setCurrentContext(target.context);
  }
  if (!kc.getCurrentContext() || !kc.getCurrentCluster()) {
    throw new KubeApiError(
      'kubeconfig',
      `${files.join(', ')} has no current context with a cluster: pass --context (contexts: ${contexts.join(', ') || 'none'})`,
    );
  }
  return kc;
}

/** The ClusterApi over client-node: the one the CLI uses. */
export function clusterApiFor(kc: KubeConfig): ClusterApi {
  const server = kc.getCurrentCluster()?.server ?? '(no server)';
  const context = kc.getCurrentContext();
  const where = `context ${context} (${server})`;
  // The object API caches each group's resource list: a fresh one after a CRD is established.
  let objects = KubernetesObjectApi.makeApiClient(kc);
  const call = async <T>(what: string, run: (api: KubernetesObjectApi) => Promise<T>): Promise<T> => {
    try {
      return await run(objects);
    } catch (error) {
      const translated = translate(error, what, where);
      if (translated.kind !== 'unknown-kind') throw translated;
      objects = KubernetesObjectApi.makeApiClient(kc);
      try {
        return await run(objects);
      } catch (again) {
        throw translate(again, what, where);
      }
    }
  };
  return {
    target: { context, server },
    async version() {
      try {
        const info = await kc.makeApiClient(VersionApi).getCode();
        return info.gitVersion;
      } catch (error) {
        throw translate(error, 'GET /version', where);
      }
    },
    async apply(object) {
      const applied = await call(`apply ${object.kind} ${object.metadata.name}`, (api) =>
        api.patch(
          object as unknown as KubernetesObject,
          undefined,
          undefined,
          LAB_FIELD_MANAGER,
          true,
          PatchStrategy.ServerSideApply,
        ),
      );
      return plain(applied);
    },
    async read(ref) {
      try {
        return plain(await call(`read ${ref.kind} ${ref.name}`, (api) => api.read(header(ref))));
      } catch (error) {
        // A kind the cluster does not serve has no objects either.
        if (error instanceof KubeApiError && (error.kind === 'unknown-kind' || error.status === 404))
          return undefined;
        throw error;
      }
    },
    async list(apiVersion, kind, options = {}) {
      const list = await call(`list ${kind}`, (api) =>
        api.list(
          apiVersion,
          kind,
          options.namespace,
          undefined,
          undefined,
          undefined,
          undefined,
          options.labelSelector,
        ),
      );
      return list.items.map((item) => plain(item));
    },
    async remove(ref) {
      try {
        await call(`delete ${ref.kind} ${ref.name}`, (api) =>
          api.delete(
            header(ref) as KubernetesObject,
            undefined,
            undefined,
            undefined,
            undefined,
            'Background',
          ),
        );
        return 'deleted';
      } catch (error) {
        if (error instanceof KubeApiError && (error.kind === 'unknown-kind' || error.status === 404))
          return 'absent';
        throw error;
      }
    },
    async proxyGet(namespace, pod, path) {
      try {
        const body: unknown = await kc
          .makeApiClient(CoreV1Api)
          .connectGetNamespacedPodProxyWithPath({ name: pod, namespace, path });
        if (typeof body !== 'string') {
          throw new Error(`pod ${namespace}/${pod} answered ${path} with ${typeof body}, not text`);
        }
        return body;
      } catch (error) {
        throw translate(error, `GET pods/${pod}/proxy/${path.slice(0, 40)}`, where);
      }
    },
    async podLog(namespace, pod, options = {}) {
      try {
        return await kc.makeApiClient(CoreV1Api).readNamespacedPodLog({
          name: pod,
          namespace,
          ...(options.container ? { container: options.container } : {}),
          ...(options.previous ? { previous: true } : {}),
          ...(options.tailLines ? { tailLines: options.tailLines } : {}),
        });
      } catch (error) {
        throw translate(error, `GET pods/${pod}/log`, where);
      }
    },
    async followPodLog(namespace, pod, options, write, signal) {
      // client-node 1.4.0 dist/log.js `Log.log` (docs/facts.md §6.1): GET pods/<pod>/log with
      // `follow`, the response body piped into `sink` (ended with it: the API ends the stream when
      // the container ends), and an AbortController that cancels the request.
      const decoder = new StringDecoder('utf8');
      // What the body still holds when the user stops is not printed after the end line.
      let stopping = false;
      const sink = new Writable({
        write(chunk: Buffer, _encoding, done) {
          if (!stopping) write(decoder.write(chunk));
          done();
        },
        final(done) {
          const rest = decoder.end();
          if (rest && !stopping) write(rest);
          done();
        },
      });
      const ended = new Promise<'ended'>((resolve, reject) => {
        sink.on('finish', () => resolve('ended'));
        sink.on('error', reject);
      });
      let controller: AbortController;
      try {
        controller = await new Log(kc).log(namespace, pod, options.container, sink, {
          follow: true,
          ...(options.previous ? { previous: true } : {}),
          ...(options.tailLines ? { tailLines: options.tailLines } : {}),
        });
      } catch (error) {
        throw translate(error, `GET pods/${pod}/log?follow=true`, where);
      }
      const stopped = new Promise<'stopped'>((resolve) => {
        const stop = () => {
          stopping = true;
          controller.abort();
          resolve('stopped');
        };
        if (signal.aborted) stop();
        else signal.addEventListener('abort', stop, { once: true });
      });
      return Promise.race([ended, stopped]);
    },
    async canI(question: AccessQuestion) {
      const review = await call('SelfSubjectAccessReview', (api) =>
        api.create({
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          metadata: {},
          spec: {
            resourceAttributes: resourceAttributes(question),
          },
        } as KubernetesObject),
      );
      return (plain(review).status as { allowed?: boolean } | undefined)?.allowed === true;
    },
    async canSubject(subject: AccessSubject, question: AccessQuestion | UrlAccessQuestion) {
      // authorization.k8s.io/v1 SubjectAccessReview (client-node 1.4.0 V1SubjectAccessReviewSpec:
      // user, groups, resourceAttributes | nonResourceAttributes). The authorizer knows only what
      // the spec says: the groups are the subject's, not inferred from the user name.
      const review = await call('SubjectAccessReview', (api) =>
        api.create({
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          metadata: {},
          spec: {
            user: subject.user,
            groups: [...subject.groups],
            ...('path' in question
              ? { nonResourceAttributes: { verb: question.verb, path: question.path } }
              : { resourceAttributes: resourceAttributes(question) }),
          },
        } as KubernetesObject),
      );
      return (plain(review).status as { allowed?: boolean } | undefined)?.allowed === true;
    },
  };
}

/** An access review's resourceAttributes (authorization.k8s.io/v1), for the user's or another subject's. */
function resourceAttributes(question: AccessQuestion) {
  return {
    verb: question.verb,
    group: question.group,
    resource: question.resource,
    ...(question.subresource ? { subresource: question.subresource } : {}),
    ...(question.namespace ? { namespace: question.namespace } : {}),
    ...(question.name ? { name: question.name } : {}),
  };
}

function header(ref: ObjectRef) {
  return {
    apiVersion: ref.apiVersion,
    kind: ref.kind,
    metadata: { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) },
  };
}

/** client-node returns typed models (dates as Date): the lab reads plain JSON. */
function plain(object: unknown): KubeObject {
  return JSON.parse(JSON.stringify(object)) as KubeObject;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The API's own message from a Status body, when it sent one. */
function statusMessage(body: unknown): string | undefined {
  const parsed = typeof body === 'string' ? safeJson(body) : body;
  const message = (parsed as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' ? message : undefined;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'CERT_HAS_EXPIRED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
]);

/** Turns client-node's and node-fetch's errors into one line a user can act on. */
export function translate(error: unknown, what: string, where: string): KubeApiError {
  if (error instanceof KubeApiError) return error;
  if (error instanceof ApiException) {
    const status = error.code;
    const detail = statusMessage(error.body) ?? `HTTP ${status}`;
    if (status === 401) {
      return new KubeApiError(
        'unauthorized',
        `${where} refused the credentials (401) on ${what}: renew them (for EKS: aws eks update-kubeconfig; a token may have expired)`,
        status,
        { cause: error },
      );
    }
    if (status === 403) {
      return new KubeApiError('forbidden', `${what} is forbidden on ${where}: ${detail}`, status, {
        cause: error,
      });
    }
    if (status === 404 && /Failed to fetch resource metadata/.test(error.message)) {
      return new KubeApiError(
        'unknown-kind',
        `${what}: the cluster does not serve this kind (its CRD is not installed or not established yet)`,
        status,
        { cause: error },
      );
    }
    if (status === 422 || status === 400) {
      return new KubeApiError('invalid', `${what} was rejected by ${where}: ${detail}`, status, {
        cause: error,
      });
    }
    return new KubeApiError('other', `${what} failed on ${where}: ${detail}`, status, { cause: error });
  }
  const message = messageOf(error);
  if (/Unrecognized API version and kind/.test(message)) {
    return new KubeApiError(
      'unknown-kind',
      `${what}: the cluster does not serve this kind (its CRD is not installed or not established yet)`,
      undefined,
      { cause: error },
    );
  }
  const code = (error as { code?: unknown }).code;
  if (
    (typeof code === 'string' && UNREACHABLE_CODES.has(code)) ||
    /FetchError|request to .* failed/.test(message)
  ) {
    return new KubeApiError(
      'unreachable',
      `${where} did not answer ${what}: ${message}. Check the cluster is up and reachable from here (VPN, endpoint access, the kubeconfig's server address)`,
      undefined,
      { cause: error },
    );
  }
  return new KubeApiError('other', `${what} failed on ${where}: ${message}`, undefined, { cause: error });
}
