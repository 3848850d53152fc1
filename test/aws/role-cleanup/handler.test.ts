import {
  DeleteRolePolicyCommand,
  DetachRolePolicyCommand,
  IAMClient,
  IAMServiceException,
  ListAttachedRolePoliciesCommand,
  ListInstanceProfilesForRoleCommand,
  ListRolePoliciesCommand,
  NoSuchEntityException,
  RemoveRoleFromInstanceProfileCommand,
  ServiceFailureException,
  UnmodifiableEntityException,
} from '@aws-sdk/client-iam';
import { mockClient } from 'aws-sdk-client-mock';
import { allCustomMatcher } from 'aws-sdk-client-mock-vitest';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import { findRolePolicies } from '../../../lib/aws/role-cleanup/cleanup.ts';
import { handleEvent, type RoleCleanupEvent } from '../../../lib/aws/role-cleanup/handler.ts';

expect.extend(allCustomMatcher);

const iamMock = mockClient(IAMClient);
const iam = new IAMClient({ region: 'us-east-1' });

const ROLE = 'lab-InstanceRole3CCE2F1D-Q1W2E3R4T5Y6';
const SSM_CORE = 'arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore';
const PATCH_ASSOCIATION = 'arn:aws:iam::aws:policy/AmazonSSMPatchAssociation';
const DEFAULT_POLICY = 'InstanceRoleDefaultPolicy1234ABCD';

const metadata = { httpStatusCode: 404, requestId: 'req-1', attempts: 1, totalRetryDelay: 0 };

/** As the SDK raises IAM's modelled not-found (error code `NoSuchEntity`, 404). */
function noSuchEntity(message: string): NoSuchEntityException {
  return new NoSuchEntityException({ message, $metadata: metadata });
}

/** As the SDK raises an error code it does not model: a plain service exception with that name. */
function unmodelledNoSuchEntity(message: string): IAMServiceException {
  return new IAMServiceException({ name: 'NoSuchEntity', $fault: 'client', $metadata: metadata, message });
}

function event(requestType: RoleCleanupEvent['RequestType'], roles: unknown[], physicalId?: string) {
  return {
    RequestType: requestType,
    ...(physicalId === undefined ? {} : { PhysicalResourceId: physicalId }),
    ResourceProperties: { ServiceToken: 'arn:aws:lambda:us-west-2:123456789012:function:x', Roles: roles },
  } satisfies RoleCleanupEvent;
}

const instanceRole = {
  RoleName: ROLE,
  ManagedPolicyArns: [SSM_CORE],
  InlinePolicyNames: [DEFAULT_POLICY],
};

function silent(): string[] {
  return [];
}

describe('RoleCleanup handler', () => {
  beforeEach(() => {
    iamMock.reset();
    iamMock.on(DetachRolePolicyCommand).resolves({});
    iamMock.on(DeleteRolePolicyCommand).resolves({});
    iamMock.on(ListInstanceProfilesForRoleCommand).resolves({ InstanceProfiles: [], IsTruncated: false });
    iamMock.on(RemoveRoleFromInstanceProfileCommand).resolves({});
  });

  describe('Delete: instance profiles', () => {
    const OWN_PROFILE = 'lab-HostLaunchTemplateProfile-ABC';
    const profile = (name: string) => ({
      InstanceProfileName: name,
      InstanceProfileId: `AIPA${name.length}`,
      Arn: `arn:aws:iam::123456789012:instance-profile/${name}`,
      Path: '/',
      CreateDate: new Date(0),
      Roles: [],
    });
    beforeEach(() => {
      iamMock.on(ListAttachedRolePoliciesCommand).resolves({ AttachedPolicies: [] });
      iamMock.on(ListRolePoliciesCommand).resolves({ PolicyNames: [] });
    });

    it("removes the role from profiles the stack did not create, over every page, and leaves the stack's own", async () => {
      iamMock
        .on(ListInstanceProfilesForRoleCommand)
        .resolvesOnce({
          InstanceProfiles: [profile(OWN_PROFILE), profile('debug-box')],
          IsTruncated: true,
          Marker: 'p2',
        })
        .resolvesOnce({ InstanceProfiles: [profile('someone-elses')], IsTruncated: false });
      const logs: string[] = [];

      const response = await handleEvent(
        event('Delete', [{ ...instanceRole, InstanceProfileNames: [OWN_PROFILE] }], `RoleCleanup:${ROLE}`),
        iam,
        (line) => logs.push(line),
      );

      expect(response.Data).toEqual({ Removed: '2' });
      expect(iamMock).toHaveReceivedNthCommandWith(ListInstanceProfilesForRoleCommand, 2, {
        RoleName: ROLE,
        Marker: 'p2',
      });
      const removed = iamMock
        .commandCalls(RemoveRoleFromInstanceProfileCommand)
        .map((call) => call.args[0].input);
      expect(removed).toEqual([
        { RoleName: ROLE, InstanceProfileName: 'debug-box' },
        { RoleName: ROLE, InstanceProfileName: 'someone-elses' },
      ]);
      expect(JSON.parse(logs.at(-1) ?? '{}').profiles).toEqual([
        { roleName: ROLE, removedFrom: ['debug-box', 'someone-elses'], kept: [OWN_PROFILE] },
      ]);
    });

    it('counts a profile that went away meanwhile as done', async () => {
      iamMock.on(ListInstanceProfilesForRoleCommand).resolves({ InstanceProfiles: [profile('gone')] });
      iamMock
        .on(RemoveRoleFromInstanceProfileCommand)
        .rejects(noSuchEntity('Instance Profile gone cannot be found.'));

      const response = await handleEvent(event('Delete', [instanceRole], `RoleCleanup:${ROLE}`), iam, silent);

      expect(response.Data).toEqual({ Removed: '0' });
    });

    it('fails naming the role and the profile when IAM refuses', async () => {
      iamMock.on(ListInstanceProfilesForRoleCommand).resolves({ InstanceProfiles: [profile('locked')] });
      iamMock.on(RemoveRoleFromInstanceProfileCommand).rejects(
        new IAMServiceException({
          name: 'AccessDenied',
          $fault: 'client',
          $metadata: metadata,
          message: 'not authorized to perform: iam:RemoveRoleFromInstanceProfile',
        }),
      );

      await expect(
        handleEvent(event('Delete', [instanceRole], `RoleCleanup:${ROLE}`), iam, silent),
      ).rejects.toThrow(
        `iam:RemoveRoleFromInstanceProfile failed on role ${ROLE}, instance profile locked: AccessDenied`,
      );
    });
  });

  describe('Delete', () => {
    it('strips what Quick Setup attached (the observed case) and leaves the stack’s own policies', async () => {
      iamMock.on(ListAttachedRolePoliciesCommand, { RoleName: ROLE }).resolves({
        AttachedPolicies: [
          { PolicyName: 'AmazonSSMManagedInstanceCore', PolicyArn: SSM_CORE },
          { PolicyName: 'AmazonSSMPatchAssociation', PolicyArn: PATCH_ASSOCIATION },
        ],
        IsTruncated: false,
      });
      iamMock
        .on(ListRolePoliciesCommand, { RoleName: ROLE })
        .resolves({ PolicyNames: [DEFAULT_POLICY, 'pr1c-patchpolicy-s3'], IsTruncated: false });
      const logs: string[] = [];

      const response = await handleEvent(
        event('Delete', [instanceRole], `RoleCleanup:${ROLE}`),
        iam,
        (line) => logs.push(line),
      );

      expect(response).toEqual({ PhysicalResourceId: `RoleCleanup:${ROLE}`, Data: { Removed: '2' } });
      expect(iamMock).toHaveReceivedCommandTimes(DetachRolePolicyCommand, 1);
      expect(iamMock).toHaveReceivedCommandWith(DetachRolePolicyCommand, {
        RoleName: ROLE,
        PolicyArn: PATCH_ASSOCIATION,
      });
      expect(iamMock).toHaveReceivedCommandTimes(DeleteRolePolicyCommand, 1);
      expect(iamMock).toHaveReceivedCommandWith(DeleteRolePolicyCommand, {
        RoleName: ROLE,
        PolicyName: 'pr1c-patchpolicy-s3',
      });
      expect(logs.join('\n')).toContain('pr1c-patchpolicy-s3');
      expect(logs.join('\n')).toContain(PATCH_ASSOCIATION);
    });

    it('follows Marker through every page of managed and inline policies', async () => {
      const arn = (n: number) => `arn:aws:iam::123456789012:policy/foreign-${n}`;
      const page = (from: number, to: number) =>
        Array.from({ length: to - from }, (_, i) => ({
          PolicyName: `foreign-${from + i}`,
          PolicyArn: arn(from + i),
        }));
      iamMock
        .on(ListAttachedRolePoliciesCommand)
        .resolvesOnce({
          AttachedPolicies: [
            { PolicyName: 'AmazonSSMManagedInstanceCore', PolicyArn: SSM_CORE },
            ...page(0, 99),
          ],
          IsTruncated: true,
          Marker: 'managed-2',
        })
        .resolvesOnce({ AttachedPolicies: page(99, 199), IsTruncated: true, Marker: 'managed-3' })
        .resolvesOnce({ AttachedPolicies: page(199, 205), IsTruncated: false });
      iamMock
        .on(ListRolePoliciesCommand)
        .resolvesOnce({
          PolicyNames: [DEFAULT_POLICY, ...Array.from({ length: 99 }, (_, i) => `inline-${i}`)],
          IsTruncated: true,
          Marker: 'inline-2',
        })
        .resolvesOnce({ PolicyNames: ['inline-99', 'inline-100'], IsTruncated: false });

      const response = await handleEvent(event('Delete', [instanceRole], `RoleCleanup:${ROLE}`), iam, silent);

      expect(response.Data).toEqual({ Removed: String(205 + 101) });
      expect(iamMock).toHaveReceivedCommandTimes(ListAttachedRolePoliciesCommand, 3);
      expect(iamMock).toHaveReceivedNthCommandWith(ListAttachedRolePoliciesCommand, 2, {
        RoleName: ROLE,
        Marker: 'managed-2',
      });
      expect(iamMock).toHaveReceivedNthCommandWith(ListAttachedRolePoliciesCommand, 3, {
        RoleName: ROLE,
        Marker: 'managed-3',
      });
      expect(iamMock).toHaveReceivedNthCommandWith(ListRolePoliciesCommand, 2, {
        RoleName: ROLE,
        Marker: 'inline-2',
      });
      expect(iamMock).toHaveReceivedCommandTimes(DetachRolePolicyCommand, 205);
      expect(iamMock).toHaveReceivedCommandWith(DetachRolePolicyCommand, {
        RoleName: ROLE,
        PolicyArn: arn(204),
      });
      expect(iamMock).toHaveReceivedCommandTimes(DeleteRolePolicyCommand, 101);
      expect(iamMock).toHaveReceivedCommandWith(DeleteRolePolicyCommand, {
        RoleName: ROLE,
        PolicyName: 'inline-100',
      });
      const detached = iamMock
        .commandCalls(DetachRolePolicyCommand)
        .map((call) => call.args[0].input.PolicyArn);
      expect(detached).not.toContain(SSM_CORE);
      const deleted = iamMock
        .commandCalls(DeleteRolePolicyCommand)
        .map((call) => call.args[0].input.PolicyName);
      expect(deleted).not.toContain(DEFAULT_POLICY);
    });

    it('counts a policy that disappeared between list and removal as done', async () => {
      iamMock.on(ListAttachedRolePoliciesCommand).resolves({
        AttachedPolicies: [
          { PolicyName: 'AmazonSSMPatchAssociation', PolicyArn: PATCH_ASSOCIATION },
          { PolicyName: 'other', PolicyArn: 'arn:aws:iam::123456789012:policy/other' },
        ],
      });
      iamMock.on(ListRolePoliciesCommand).resolves({ PolicyNames: ['pr1c-patchpolicy-s3'] });
      iamMock
        .on(DetachRolePolicyCommand, { PolicyArn: PATCH_ASSOCIATION })
        .rejects(noSuchEntity(`Policy ${PATCH_ASSOCIATION} was not found.`));
      iamMock
        .on(DeleteRolePolicyCommand)
        .rejects(unmodelledNoSuchEntity(`The role policy with name pr1c-patchpolicy-s3 cannot be found.`));
      const logs: string[] = [];

      const response = await handleEvent(
        event('Delete', [instanceRole], `RoleCleanup:${ROLE}`),
        iam,
        (line) => logs.push(line),
      );

      expect(response.Data).toEqual({ Removed: '1' });
      expect(iamMock).toHaveReceivedCommandWith(DetachRolePolicyCommand, {
        PolicyArn: 'arn:aws:iam::123456789012:policy/other',
      });
      const result = JSON.parse(logs.at(-1) ?? '{}').results[0];
      expect(result.alreadyGone).toEqual([PATCH_ASSOCIATION, 'pr1c-patchpolicy-s3']);
    });

    it('succeeds without touching anything when the role is already gone', async () => {
      iamMock
        .on(ListAttachedRolePoliciesCommand)
        .rejects(noSuchEntity(`The role with name ${ROLE} cannot be found.`));

      const response = await handleEvent(event('Delete', [instanceRole], `RoleCleanup:${ROLE}`), iam, silent);

      expect(response).toEqual({ PhysicalResourceId: `RoleCleanup:${ROLE}`, Data: { Removed: '0' } });
      expect(iamMock).not.toHaveReceivedCommand(ListRolePoliciesCommand);
      expect(iamMock).not.toHaveReceivedCommand(DetachRolePolicyCommand);
      expect(iamMock).not.toHaveReceivedCommand(DeleteRolePolicyCommand);
    });

    it('treats a role deleted between the two listings as gone', async () => {
      iamMock.on(ListAttachedRolePoliciesCommand).resolves({
        AttachedPolicies: [{ PolicyName: 'AmazonSSMPatchAssociation', PolicyArn: PATCH_ASSOCIATION }],
      });
      iamMock
        .on(ListRolePoliciesCommand)
        .rejects(unmodelledNoSuchEntity(`The role with name ${ROLE} cannot be found.`));

      const found = await findRolePolicies(iam, {
        roleName: ROLE,
        managedPolicyArns: [SSM_CORE],
        inlinePolicyNames: [],
      });

      expect(found.roleExists).toBe(false);
      expect(found.foreignManaged).toEqual([]);
    });

    it('fails naming the role and the policy when IAM refuses a detach, and still cleans the other roles', async () => {
      const otherRole = 'lab-HelperRole-ZZZ';
      iamMock.on(ListAttachedRolePoliciesCommand).resolves({
        AttachedPolicies: [{ PolicyName: 'AmazonSSMPatchAssociation', PolicyArn: PATCH_ASSOCIATION }],
      });
      iamMock.on(ListRolePoliciesCommand).resolves({ PolicyNames: [] });
      iamMock.on(DetachRolePolicyCommand, { RoleName: ROLE }).rejects(
        new UnmodifiableEntityException({
          message: 'Cannot perform the operation on the protected role',
          $metadata: { httpStatusCode: 400 },
        }),
      );

      const promise = handleEvent(
        event(
          'Delete',
          [instanceRole, { RoleName: otherRole, ManagedPolicyArns: [], InlinePolicyNames: [] }],
          `RoleCleanup:${ROLE},${otherRole}`,
        ),
        iam,
        silent,
      );

      await expect(promise).rejects.toThrow(
        `iam:DetachRolePolicy failed on role ${ROLE}, policy ${PATCH_ASSOCIATION}: UnmodifiableEntityException: Cannot perform the operation on the protected role`,
      );
      expect(iamMock).toHaveReceivedCommandWith(DetachRolePolicyCommand, {
        RoleName: otherRole,
        PolicyArn: PATCH_ASSOCIATION,
      });
    });

    it('fails naming the role and the inline policy when a delete fails', async () => {
      iamMock.on(ListAttachedRolePoliciesCommand).resolves({ AttachedPolicies: [] });
      iamMock.on(ListRolePoliciesCommand).resolves({ PolicyNames: ['pr1c-patchpolicy-s3'] });
      iamMock
        .on(DeleteRolePolicyCommand)
        .rejects(
          new ServiceFailureException({ message: 'internal failure', $metadata: { httpStatusCode: 500 } }),
        );

      await expect(
        handleEvent(event('Delete', [instanceRole], `RoleCleanup:${ROLE}`), iam, silent),
      ).rejects.toThrow(
        `iam:DeleteRolePolicy failed on role ${ROLE}, policy pr1c-patchpolicy-s3: ServiceFailureException: internal failure`,
      );
    });

    it('fails naming the role and the action when listing is denied', async () => {
      iamMock.on(ListAttachedRolePoliciesCommand).rejects(
        new IAMServiceException({
          name: 'AccessDenied',
          $fault: 'client',
          $metadata: { httpStatusCode: 403 },
          message: `User: arn:aws:sts::123456789012:assumed-role/x/y is not authorized to perform: iam:ListAttachedRolePolicies on resource: role ${ROLE}`,
        }),
      );

      await expect(
        handleEvent(event('Delete', [instanceRole], `RoleCleanup:${ROLE}`), iam, silent),
      ).rejects.toThrow(`iam:ListAttachedRolePolicies failed on role ${ROLE}: AccessDenied: User:`);
    });

    it('strips everything when the stack declared nothing on the role (CloudFormation drops empty lists)', async () => {
      iamMock.on(ListAttachedRolePoliciesCommand).resolves({
        AttachedPolicies: [{ PolicyName: 'AmazonSSMPatchAssociation', PolicyArn: PATCH_ASSOCIATION }],
      });
      iamMock.on(ListRolePoliciesCommand).resolves({ PolicyNames: ['pr1c-patchpolicy-s3'] });

      const response = await handleEvent(
        event('Delete', [{ RoleName: ROLE }], `RoleCleanup:${ROLE}`),
        iam,
        silent,
      );

      expect(response.Data).toEqual({ Removed: '2' });
    });
  });

  describe('Create and Update', () => {
    it('Create records the allow-list and makes no IAM call', async () => {
      const logs: string[] = [];
      const response = await handleEvent(event('Create', [instanceRole]), iam, (line) => logs.push(line));

      expect(response).toEqual({ PhysicalResourceId: `RoleCleanup:${ROLE}` });
      expect(iamMock).not.toHaveReceivedAnyCommand();
      expect(JSON.parse(logs[0] ?? '{}').allowLists).toEqual([
        {
          roleName: ROLE,
          managedPolicyArns: [SSM_CORE],
          inlinePolicyNames: [DEFAULT_POLICY],
          instanceProfileNames: [],
        },
      ]);
    });

    it('Update keeps the physical id (so CloudFormation never sends a Delete for it) and makes no IAM call', async () => {
      const response = await handleEvent(
        event(
          'Update',
          [{ ...instanceRole, InlinePolicyNames: [DEFAULT_POLICY, 'Extra'] }],
          `RoleCleanup:${ROLE}`,
        ),
        iam,
        silent,
      );

      expect(response).toEqual({ PhysicalResourceId: `RoleCleanup:${ROLE}` });
      expect(iamMock).not.toHaveReceivedAnyCommand();
    });

    it('Create fails on malformed properties, naming the property', async () => {
      await expect(handleEvent(event('Create', []), iam, silent)).rejects.toThrow(
        'RoleCleanup: property Roles must be a non-empty list, got []',
      );
      await expect(
        handleEvent(event('Create', [{ RoleName: ROLE, ManagedPolicyArns: 'arn:x' }]), iam, silent),
      ).rejects.toThrow('RoleCleanup: Roles[0].ManagedPolicyArns must be a list of strings, got "arn:x"');
    });
  });
});
