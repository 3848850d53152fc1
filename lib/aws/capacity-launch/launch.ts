import { createHash } from 'node:crypto';
import {
  DescribeInstancesCommand,
  DescribeInstanceTypeOfferingsCommand,
  type EC2Client,
  type Filter,
  type Instance,
  RunInstancesCommand,
  type RunInstancesCommandInput,
} from '@aws-sdk/client-ec2';
import { type OnDemandQuota, onDemandQuotaFor } from '../../facts/instances.ts';

// The quota table lives with the other plain instance facts, which the configuration reads too.
export { type OnDemandQuota, onDemandQuotaFor };

/** One of the lab's public subnets: the launch picks an Availability Zone by picking its subnet. */
export interface LabSubnet {
  readonly subnetId: string;
  readonly availabilityZone: string;
}

/** A tag every launched instance and volume carries, so that IAM can scope termination to them. */
export interface StackTag {
  readonly key: string;
  readonly value: string;
}

/** What the launch needs: the same inputs on every attempt except the subnet and the type. */
export interface LaunchRequest {
  readonly launchTemplateId: string;
  readonly launchTemplateVersion: string;
  readonly subnets: readonly LabSubnet[];
  readonly securityGroupId: string;
  /** The primary type first, then the fallback types in the order they are tried. */
  readonly instanceTypes: readonly string[];
  /** Availability Zones tried first, in this order. */
  readonly preferredAzs: readonly string[];
  /** vCPUs of the primary type, for the quota message. */
  readonly vcpusNeeded: number;
  /** The quota the quota message names; derived from the failing type when not given. */
  readonly quota?: OnDemandQuota;
  /** What the whole stack needs of the primary type's quota at once; absent: this host alone. */
  readonly stackNeed?: StackQuotaNeed;
  readonly stackTag: StackTag;
  /**
   * What this host boots with (`llm-gateway-lab:generation` = the resource's Generation): put on
   * the instance, so that a repeated request finds and adopts the host it launched before.
   */
  readonly generationTag: StackTag;
  /**
   * The launching resource (`llm-gateway-lab:resource` = its logical id): what a Delete of a
   * cancelled create terminates by, whatever the generation.
   */
  readonly resourceTag?: StackTag;
  /**
   * The CloudFormation request this launch serves. Client tokens are derived from it, so a
   * retried or duplicated call of the same request can never launch a second instance.
   */
  readonly requestId: string;
}

/** The outcome of one RunInstances attempt (after any transient retries in the same AZ). */
export interface LaunchAttempt {
  readonly az: string;
  readonly instanceType: string;
  /** The EC2 error code; absent when the attempt launched the instance. */
  readonly code?: string;
  readonly message?: string;
}

export interface LaunchResult {
  readonly instanceId: string;
  readonly availabilityZone: string;
  readonly instanceType: string;
  readonly attempts: readonly LaunchAttempt[];
  /** One line per attempt and per retry, as logged. */
  readonly log: readonly string[];
}

/** Bounded backoff for transient errors: `maxRetries` retries, `baseDelayMs` doubled each time. */
export interface RetryPolicy {
  readonly maxRetries: number;
  readonly baseDelayMs: number;
}

export interface LaunchDeps {
  /** Build it with `maxAttempts: 1`: the SDK would otherwise retry capacity errors in the same AZ. */
  readonly ec2: EC2Client;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly log?: (line: string) => void;
  readonly retry?: RetryPolicy;
}

export const DEFAULT_RETRY: RetryPolicy = { maxRetries: 3, baseDelayMs: 1000 };

/** What to do after a failed attempt. */
export type FailureClass = 'next-az' | 'stop' | 'transient';

// The capacity of this AZ (or this subnet) is the problem: another AZ may well have room.
const NEXT_AZ_CODES = new Set([
  'InsufficientInstanceCapacity',
  'Unsupported',
  'InsufficientHostCapacity',
  'InsufficientReservedInstanceCapacity',
  'InsufficientFreeAddressesInSubnet',
]);

// The same request fails in every AZ: trying on only delays the message the person needs.
const STOP_CODES = new Set([
  'VcpuLimitExceeded',
  'InstanceLimitExceeded',
  'UnauthorizedOperation',
  'AuthFailure',
  'OptInRequired',
  'PendingVerification',
  'Blocked',
]);

const TRANSIENT_CODES = new Set([
  'Throttling',
  'ThrottlingException',
  'RequestLimitExceeded',
  'ServiceUnavailable',
  'Unavailable',
  'InternalError',
  'InternalFailure',
  'TimeoutError',
]);

const QUOTA_CODES = new Set(['VcpuLimitExceeded', 'InstanceLimitExceeded']);

interface ErrorFacts {
  readonly code: string;
  readonly message: string;
  readonly httpStatusCode?: number;
}

/** SDK v3 EC2 errors are all `EC2ServiceException`; the EC2 error code is in `name`. */
export function errorFacts(err: unknown): ErrorFacts {
  if (err instanceof Error) {
    const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    return { code: err.name, message: err.message, httpStatusCode: status };
  }
  return { code: 'UnknownError', message: String(err) };
}

/**
 * A new instance profile takes seconds to reach EC2; until then RunInstances calls its ARN
 * invalid. On a first deploy the profile is minutes old at most, so this is worth a retry.
 */
const PROFILE_NOT_YET_VISIBLE = /iamInstanceProfile|Instance Profile/i;

export function classifyLaunchError(err: unknown): FailureClass {
  const { code, message, httpStatusCode } = errorFacts(err);
  if (NEXT_AZ_CODES.has(code)) return 'next-az';
  if (code === 'InvalidParameterValue' && PROFILE_NOT_YET_VISIBLE.test(message)) return 'transient';
  if (STOP_CODES.has(code) || code.startsWith('Invalid')) return 'stop';
  if (TRANSIENT_CODES.has(code) || httpStatusCode === 503) return 'transient';
  // An error nobody expected says nothing about the other AZs: record it and move on.
  return 'next-az';
}

/** Every host of the stack that counts against one quota: their vCPUs together, and who needs them. */
export interface StackQuotaNeed {
  readonly vcpus: number;
  /** `server 48 + gpu-1 48` */
  readonly hosts: string;
}

/** The actionable message for an error that stops the launch in every AZ. */
export function stopMessage(
  attempt: Required<LaunchAttempt>,
  vcpus: number | undefined,
  knownQuota?: OnDemandQuota,
  stackNeed?: StackQuotaNeed,
): string {
  const { code, instanceType, az, message } = attempt;
  const said = `EC2 said (${code} in ${az}): ${message}`;
  if (QUOTA_CODES.has(code)) {
    const quota = knownQuota ?? onDemandQuotaFor(instanceType);
    const needed = vcpus === undefined ? `as many vCPUs as one ${instanceType} has` : `${vcpus} vCPUs`;
    const where =
      quota.code === undefined ? 'Service Quotas > Amazon EC2' : `Service Quotas, quota code ${quota.code}`;
    // The stack's hosts launch side by side: an increase to one host's size fails the next one.
    const total =
      stackNeed === undefined
        ? needed
        : `the stack's ${stackNeed.vcpus} vCPUs of it at once (${stackNeed.hosts}) plus what other instances use`;
    return (
      `Launch stopped: the account's "${quota.name}" quota in this region does not leave ${needed} ` +
      `free for ${instanceType} (instances of that class already running count against it). ` +
      `Request an increase to at least ${total} (${where}) or stop other instances of the class, ` +
      `then deploy again. ${said}`
    );
  }
  if (code === 'UnauthorizedOperation' || code === 'AuthFailure') {
    return (
      `Launch stopped: the launch function's role may not run ${instanceType} with these inputs ` +
      '(decode the message with `aws sts decode-authorization-message --encoded-message <...>`). ' +
      said
    );
  }
  return (
    `Launch stopped: EC2 rejected the request for ${instanceType}, and would in every Availability Zone. ` +
    'Check the launch template (it must carry no network interfaces and no security groups: ' +
    `the launch gives both per attempt), the subnets and the instance type. ${said}`
  );
}

const CELL_LIMIT = 160;

function cell(text: string): string {
  const flat = text.replace(/\s+/g, ' ').replaceAll('|', '/').trim();
  return flat.length > CELL_LIMIT ? `${flat.slice(0, CELL_LIMIT - 1)}…` : flat;
}

/** Every attempt and why it failed, in the shape SkyPilot users know as "Reasons for provision failures". */
export function failureTable(attempts: readonly LaunchAttempt[]): string {
  const rows = attempts.map(
    (a) => `| ${a.az} | ${a.instanceType} | ${a.code ?? '-'} | ${cell(a.message ?? '')} |`,
  );
  return ['| AZ | instance type | error code | message |', '|---|---|---|---|', ...rows].join('\n');
}

/**
 * The AZs to try for one type: offered AZs that have a lab subnet, preferred ones first in their
 * order, the others by name so that every run tries them in the same order.
 */
export function orderCandidateAzs(
  offered: ReadonlySet<string>,
  subnets: readonly LabSubnet[],
  preferred: readonly string[],
): string[] {
  const usable = new Set(subnets.map((s) => s.availabilityZone).filter((az) => offered.has(az)));
  const first = preferred.filter((az, i) => usable.has(az) && preferred.indexOf(az) === i);
  const rest = [...usable].filter((az) => !first.includes(az)).sort();
  return [...first, ...rest];
}

/**
 * The ClientToken of one attempt: the same for the same CloudFormation request, type and AZ, and
 * different for any other. EC2 returns the instance of an earlier request with the same token
 * instead of launching again; a token holds at most 64 ASCII characters and stays valid for at
 * least 24 hours after the instance terminates (EC2 API Reference, "Ensuring idempotency").
 */
export function clientTokenFor(requestId: string, instanceType: string, az: string): string {
  const digest = createHash('sha256').update(`${requestId}\n${instanceType}\n${az}`).digest('hex');
  return `lab-${digest.slice(0, 60)}`;
}

/** Every token this request may have launched with: one per type and lab subnet AZ. */
export function requestClientTokens(request: LaunchRequest): string[] {
  const azs = [...new Set(request.subnets.map((s) => s.availabilityZone))].sort();
  return request.instanceTypes.flatMap((type) =>
    azs.map((az) => clientTokenFor(request.requestId, type, az)),
  );
}

/** Instances matching the filters, over every page, oldest launch first. */
export async function describeInstancesWhere(ec2: EC2Client, filters: Filter[]): Promise<Instance[]> {
  const found: Instance[] = [];
  let nextToken: string | undefined;
  do {
    const page = await ec2.send(new DescribeInstancesCommand({ Filters: filters, NextToken: nextToken }));
    for (const reservation of page.Reservations ?? []) found.push(...(reservation.Instances ?? []));
    nextToken = page.NextToken;
  } while (nextToken);
  const time = (i: Instance) => i.LaunchTime?.getTime() ?? 0;
  return found.sort((a, b) => time(a) - time(b));
}

/** Instances launched with any of the tokens (DescribeInstances filter `client-token`), in any state. */
export function instancesByClientToken(ec2: EC2Client, tokens: readonly string[]): Promise<Instance[]> {
  return describeInstancesWhere(ec2, [{ Name: 'client-token', Values: [...tokens] }]);
}

/** Pending or running instances carrying every one of the tags (this stack, its resource, a generation). */
export function liveHosts(ec2: EC2Client, ...tags: (StackTag | undefined)[]): Promise<Instance[]> {
  return describeInstancesWhere(ec2, [
    ...tags.filter((t) => t !== undefined).map((t) => ({ Name: `tag:${t.key}`, Values: [t.value] })),
    { Name: 'instance-state-name', Values: ['pending', 'running'] },
  ]);
}

/** States in which an instance still bills or may run again: what a teardown must end. */
export const NOT_ENDED_STATES = ['pending', 'running', 'stopping', 'stopped', 'shutting-down'] as const;

/** Instances carrying every one of the tags that are not terminated yet (shutting-down included). */
export function unendedInstances(ec2: EC2Client, ...tags: StackTag[]): Promise<Instance[]> {
  return describeInstancesWhere(ec2, [
    ...tags.map((t) => ({ Name: `tag:${t.key}`, Values: [t.value] })),
    { Name: 'instance-state-name', Values: [...NOT_ENDED_STATES] },
  ]);
}

/**
 * Whether a failed RunInstances may still have launched: no answer (timeout, connection reset),
 * a server error, throttling that outlasted the retries, or a token EC2 already knows with other
 * parameters. Such an attempt is looked up by its token before the next AZ is tried.
 */
export function launchMayHaveHappened(err: unknown): boolean {
  const { code, httpStatusCode } = errorFacts(err);
  if (code === 'IdempotentParameterMismatch') return true;
  if (httpStatusCode === undefined) return true;
  return classifyLaunchError(err) === 'transient';
}

/** The RunInstances input of one attempt. */
export function runInstancesInput(
  request: LaunchRequest,
  instanceType: string,
  subnetId: string,
  clientToken: string,
): RunInstancesCommandInput {
  const tags = [
    { Key: request.stackTag.key, Value: request.stackTag.value },
    { Key: request.generationTag.key, Value: request.generationTag.value },
    ...(request.resourceTag ? [{ Key: request.resourceTag.key, Value: request.resourceTag.value }] : []),
  ];
  return {
    MinCount: 1,
    MaxCount: 1,
    InstanceType: instanceType as RunInstancesCommandInput['InstanceType'],
    LaunchTemplate: { LaunchTemplateId: request.launchTemplateId, Version: request.launchTemplateVersion },
    // The subnet is chosen per attempt, and a public IP in a chosen subnet can only be asked for on a
    // network interface. Groups go on that interface too: EC2 rejects instance-level security
    // groups beside a network interface, so the template carries neither.
    NetworkInterfaces: [
      {
        DeviceIndex: 0,
        SubnetId: subnetId,
        AssociatePublicIpAddress: true,
        DeleteOnTermination: true,
        Groups: [request.securityGroupId],
      },
    ],
    ClientToken: clientToken,
    TagSpecifications: [
      { ResourceType: 'instance', Tags: tags },
      { ResourceType: 'volume', Tags: tags },
    ],
  };
}

/** Raised when no instance could be launched; the message is what CloudFormation shows. */
export class CapacityLaunchError extends Error {
  override readonly name = 'CapacityLaunchError';
  readonly attempts: readonly LaunchAttempt[];
  readonly log: readonly string[];

  constructor(message: string, attempts: readonly LaunchAttempt[], log: readonly string[]) {
    super(message);
    this.attempts = attempts;
    this.log = log;
  }
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface Runtime {
  readonly ec2: EC2Client;
  readonly sleep: (ms: number) => Promise<void>;
  readonly say: (line: string) => void;
  readonly retry: RetryPolicy;
}

/** How often, and how far apart, an uncertain launch is looked up by its token. */
export const TOKEN_LOOKUPS = 3;
export const TOKEN_LOOKUP_DELAY_MS = 5000;

/** Calls `call` again after transient errors, with bounded doubling delays; rethrows the rest. */
async function withTransientRetry<T>(rt: Runtime, what: string, call: () => Promise<T>): Promise<T> {
  for (let retry = 0; ; retry++) {
    try {
      return await call();
    } catch (err) {
      if (classifyLaunchError(err) !== 'transient' || retry >= rt.retry.maxRetries) throw err;
      const delay = rt.retry.baseDelayMs * 2 ** retry;
      rt.say(
        `${what}: ${errorFacts(err).code}, retrying in ${delay / 1000}s (retry ${retry + 1} of ${rt.retry.maxRetries})`,
      );
      await rt.sleep(delay);
    }
  }
}

/** The AZs of the region that offer the type, over every page of the answer. */
async function offeredAzs(rt: Runtime, instanceType: string): Promise<Set<string>> {
  const azs = new Set<string>();
  let nextToken: string | undefined;
  do {
    const token = nextToken;
    const page = await withTransientRetry(rt, `${instanceType}: DescribeInstanceTypeOfferings`, () =>
      rt.ec2.send(
        new DescribeInstanceTypeOfferingsCommand({
          LocationType: 'availability-zone',
          Filters: [{ Name: 'instance-type', Values: [instanceType] }],
          NextToken: token,
        }),
      ),
    );
    for (const offering of page.InstanceTypeOfferings ?? []) {
      if (offering.Location) azs.add(offering.Location);
    }
    nextToken = page.NextToken;
  } while (nextToken);
  return azs;
}

type AttemptOutcome = { readonly instanceId: string } | { readonly error: unknown };

async function attemptInAz(
  rt: Runtime,
  request: LaunchRequest,
  instanceType: string,
  subnet: LabSubnet,
): Promise<AttemptOutcome> {
  // One token per request, type and AZ: a retry after a throttle or timeout, or a repeated call of
  // the handler, must not launch a second instance, while the next AZ is a new request.
  const az = subnet.availabilityZone;
  const token = clientTokenFor(request.requestId, instanceType, az);
  const input = runInstancesInput(request, instanceType, subnet.subnetId, token);
  try {
    const output = await withTransientRetry(rt, `${instanceType} in ${az}`, () =>
      rt.ec2.send(new RunInstancesCommand(input)),
    );
    const instanceId = output.Instances?.[0]?.InstanceId;
    if (!instanceId) throw new Error('RunInstances answered without an instance id');
    return { instanceId };
  } catch (error) {
    if (!launchMayHaveHappened(error)) return { error };
    const found = await lookUpUncertainLaunch(rt, instanceType, az, token, error);
    return found ? { instanceId: found } : { error };
  }
}

/**
 * After a RunInstances whose outcome is unknown: the instance launched with its token, if any.
 * Looked up a few times, since a new instance can take seconds to show in DescribeInstances. When
 * the lookup itself fails, nobody can tell whether a host runs: the launch stops rather than risk
 * a second, untracked one.
 */
async function lookUpUncertainLaunch(
  rt: Runtime,
  instanceType: string,
  az: string,
  token: string,
  cause: unknown,
): Promise<string | undefined> {
  const { code } = errorFacts(cause);
  rt.say(`${instanceType}: no answer to RunInstances in ${az} (${code}), looking it up by its client token`);
  for (let lookup = 1; lookup <= TOKEN_LOOKUPS; lookup++) {
    let found: Instance[];
    try {
      found = await withTransientRetry(rt, `${instanceType}: client token lookup in ${az}`, () =>
        instancesByClientToken(rt.ec2, [token]),
      );
    } catch (err) {
      const facts = errorFacts(err);
      throw new CapacityLaunchError(
        `Launch stopped: RunInstances in ${az} ended with ${code} and the lookup of its client token ${token} ` +
          `failed (${facts.code}: ${facts.message}), so it is unknown whether an instance was launched. ` +
          `Look for an instance with that client token (aws ec2 describe-instances --filters Name=client-token,Values=${token}) ` +
          'before deploying again.',
        [],
        [],
      );
    }
    const instanceId = found[0]?.InstanceId;
    if (instanceId) {
      rt.say(`${instanceType}: the lost RunInstances in ${az} did launch ${instanceId}`);
      return instanceId;
    }
    if (lookup < TOKEN_LOOKUPS) await rt.sleep(TOKEN_LOOKUP_DELAY_MS);
  }
  rt.say(`${instanceType}: no instance carries the client token of ${az}: nothing was launched there`);
  return undefined;
}

function whatComesNext(azs: readonly string[], index: number, types: readonly string[], typeIndex: number) {
  const nextAz = azs[index + 1];
  if (nextAz !== undefined) return `trying ${nextAz}`;
  const nextType = types[typeIndex + 1];
  return nextType === undefined ? 'no Availability Zone left' : `trying ${nextType}`;
}

/** The error for an attempt that stopped the launch: its quota or rejection message and every attempt. */
function quotaOrStopError(
  request: LaunchRequest,
  attempt: Required<LaunchAttempt>,
  typeIndex: number,
  attempts: readonly LaunchAttempt[],
  log: readonly string[],
): CapacityLaunchError {
  const vcpus = typeIndex === 0 ? request.vcpusNeeded : undefined;
  const quota = typeIndex === 0 ? request.quota : undefined;
  const stackNeed = typeIndex === 0 ? request.stackNeed : undefined;
  return new CapacityLaunchError(
    `${stopMessage(attempt, vcpus, quota, stackNeed)}\nAttempts:\n${failureTable(attempts)}`,
    attempts,
    log,
  );
}

/**
 * Launches one instance, trying each offered AZ that has a lab subnet and then each fallback type,
 * until one attempt succeeds or an error says no other AZ would do better.
 */
export async function launchWithFallback(request: LaunchRequest, deps: LaunchDeps): Promise<LaunchResult> {
  const log: string[] = [];
  const rt: Runtime = {
    ec2: deps.ec2,
    sleep: deps.sleep ?? defaultSleep,
    retry: deps.retry ?? DEFAULT_RETRY,
    say: (line) => {
      log.push(line);
      deps.log?.(line);
    },
  };
  const attempts: LaunchAttempt[] = [];
  const types = request.instanceTypes;
  const subnetAzs = [...new Set(request.subnets.map((s) => s.availabilityZone))].sort();
  // A quota refusal ends every type of that quota bucket, but not a fallback type in another one.
  const refusedBuckets = new Map<string, { attempt: Required<LaunchAttempt>; typeIndex: number }>();
  const bucketOf = (type: string, index: number) =>
    (index === 0 && request.quota ? request.quota : onDemandQuotaFor(type)).name;

  for (const [typeIndex, instanceType] of types.entries()) {
    const bucket = bucketOf(instanceType, typeIndex);
    if (refusedBuckets.has(bucket)) {
      rt.say(`${instanceType}: skipped, the "${bucket}" quota already refused an earlier type`);
      continue;
    }
    const offered = await offeredAzs(rt, instanceType);
    const azs = orderCandidateAzs(offered, request.subnets, request.preferredAzs);
    const notOffered = subnetAzs.filter((az) => !offered.has(az));
    if (notOffered.length > 0) rt.say(`${instanceType}: not offered in ${notOffered.join(', ')}, skipped`);
    if (azs.length === 0) {
      rt.say(`${instanceType}: no Availability Zone with a lab subnet offers it`);
      continue;
    }
    for (const [index, az] of azs.entries()) {
      const subnet = request.subnets.find((s) => s.availabilityZone === az) as LabSubnet;
      const outcome = await attemptInAz(rt, request, instanceType, subnet);
      if ('instanceId' in outcome) {
        attempts.push({ az, instanceType });
        rt.say(`${instanceType}: launched ${outcome.instanceId} in ${az}`);
        return { instanceId: outcome.instanceId, availabilityZone: az, instanceType, attempts, log };
      }
      const { code, message } = errorFacts(outcome.error);
      const attempt = { az, instanceType, code, message };
      attempts.push(attempt);
      if (classifyLaunchError(outcome.error) === 'stop') {
        const otherBucket = types.some((t, i) => i > typeIndex && bucketOf(t, i) !== bucket);
        if (QUOTA_CODES.has(code) && (otherBucket || refusedBuckets.size > 0)) {
          refusedBuckets.set(bucket, { attempt, typeIndex });
          rt.say(
            `${instanceType}: ${code} in ${az}: the "${bucket}" quota is full; trying the types of other quotas`,
          );
          break;
        }
        rt.say(`${instanceType}: ${code} in ${az}, stopping: no other Availability Zone would do better`);
        throw quotaOrStopError(request, attempt, typeIndex, attempts, log);
      }
      rt.say(`${instanceType}: ${code} in ${az}, ${whatComesNext(azs, index, types, typeIndex)}`);
    }
  }
  const [firstRefusal, ...moreRefusals] = refusedBuckets.values();
  if (firstRefusal) {
    const error = quotaOrStopError(request, firstRefusal.attempt, firstRefusal.typeIndex, attempts, log);
    if (moreRefusals.length === 0) throw error;
    const others = [...refusedBuckets.keys()].slice(1).map((name) => `"${name}"`);
    throw new CapacityLaunchError(
      error.message.replace(
        '\nAttempts:',
        `\nThe fallback types' quotas refused too: ${others.join(', ')}.\nAttempts:`,
      ),
      attempts,
      log,
    );
  }

  const tried = types.join(', ');
  const header =
    attempts.length === 0
      ? `No instance launched: no Availability Zone with a lab subnet (${subnetAzs.join(', ')}) offers ${tried}.`
      : `No instance launched: every offered Availability Zone failed for ${tried}. ` +
        'Reasons for provision failures:';
  throw new CapacityLaunchError(
    attempts.length === 0 ? header : `${header}\n${failureTable(attempts)}`,
    attempts,
    log,
  );
}
