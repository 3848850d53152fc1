import 'aws-sdk-client-mock-vitest/extend';
import { DescribeInstanceTypeOfferingsCommand, RunInstancesCommand } from '@aws-sdk/client-ec2';
import { describe, expect, it } from 'vitest';
import {
  ATTEMPT_LOG_LIMIT,
  attemptLogAttribute,
  launchInputsChanged,
  parseLaunchRequest,
  startFailureAdvice,
} from '../../../lib/aws/capacity-launch/handler.ts';
import { REASON_LIMIT, withCappedReason } from '../../../lib/aws/capacity-launch/reason.ts';
import { ec2Error } from './fake-ec2.ts';
import { deps, handle, PROPS, REQUEST_ID, useHandlerHarness } from './handler-harness.ts';

/** How the handler reads CloudFormation's events, and the failure reasons it gives back. */

const { ec2Mock } = useHandlerHarness();

describe('event parsing', () => {
  it('reads the properties as CloudFormation sends them', () => {
    expect(parseLaunchRequest(PROPS, REQUEST_ID)).toEqual({
      launchTemplateId: 'lt-0123456789abcdef0',
      launchTemplateVersion: '1',
      subnets: [
        { subnetId: 'subnet-a', availabilityZone: 'us-west-2a' },
        { subnetId: 'subnet-b', availabilityZone: 'us-west-2b' },
      ],
      securityGroupId: 'sg-0123',
      instanceTypes: ['g6.12xlarge'],
      preferredAzs: [],
      vcpusNeeded: 48,
      stackTag: { key: 'llm-gateway-lab:stack', value: 'LlmGatewayLab' },
      generationTag: { key: 'llm-gateway-lab:generation', value: '1' },
      requestId: REQUEST_ID,
    });
  });

  it("keeps a K3s agent in its server's AZ: only that subnet, never another AZ", () => {
    const agent = { ...PROPS, PreferredAzs: ['us-west-2a'], RequiredAz: 'us-west-2b' };
    expect(parseLaunchRequest(agent, REQUEST_ID)).toMatchObject({
      subnets: [{ subnetId: 'subnet-b', availabilityZone: 'us-west-2b' }],
      preferredAzs: ['us-west-2b'],
    });
    expect(() => parseLaunchRequest({ ...PROPS, RequiredAz: 'us-west-2c' }, REQUEST_ID)).toThrow(
      'CapacityLaunch: RequiredAz us-west-2c has no lab subnet; the subnets are in us-west-2a, us-west-2b',
    );
    // A server moved to another AZ moves its agents: the required AZ is a launch input.
    expect(launchInputsChanged(agent, { ...agent, RequiredAz: 'us-west-2a' })).toBe(true);
  });

  it('names a missing property', () => {
    const { SecurityGroupId: _, ...rest } = PROPS;
    expect(() => parseLaunchRequest(rest, REQUEST_ID)).toThrow(
      'CapacityLaunch: property SecurityGroupId must be a non-empty string, got undefined',
    );
  });

  it('compares only the launch inputs', () => {
    expect(launchInputsChanged(PROPS, { ...PROPS, StackTagValue: 'Other', VcpusNeeded: '1' })).toBe(false);
    expect(launchInputsChanged(PROPS, { ...PROPS, SecurityGroupId: 'sg-9' })).toBe(true);
    expect(launchInputsChanged(undefined, PROPS)).toBe(true);
  });

  it('shortens a long attempt log, keeping the newest lines and saying so', () => {
    const lines = Array.from(
      { length: 60 },
      (_, i) => `g6.12xlarge: InsufficientInstanceCapacity, line ${i}`,
    );
    const log = attemptLogAttribute(lines);
    expect(log.length).toBeLessThanOrEqual(ATTEMPT_LOG_LIMIT);
    expect(log).toMatch(/^\(\d+ earlier lines omitted; the launch function's log has them all\)\n/);
    expect(log.endsWith('line 59')).toBe(true);
    expect(attemptLogAttribute(['short'])).toBe('short');
  });
});

describe('failure reasons', () => {
  it('explains Client.InternalError at start as the default EBS key the launch role may not use', () => {
    const advice = startFailureAdvice('Client.InternalError');
    expect(advice).toContain('aws ec2 get-ebs-default-kms-key-id');
    expect(advice).toContain('kms:CreateGrant');
    expect(advice).toContain('aws ec2 reset-ebs-default-kms-key-id');
    expect(startFailureAdvice('Server.InternalError')).toBe('');
  });

  it('caps a 6 KB launch failure at the reason limit, with the AZ table summarized and the full text logged', async () => {
    const azs = 'abcdef'.split('').map((letter) => `us-west-2${letter}`);
    const types = ['g6.12xlarge', 'g6.24xlarge', 'g6.48xlarge', 'g6e.12xlarge', 'g5.12xlarge'];
    ec2Mock.on(DescribeInstanceTypeOfferingsCommand).callsFake((input) => ({
      InstanceTypeOfferings: azs.map((Location) => ({
        InstanceType: input.Filters?.[0]?.Values?.[0],
        Location,
      })),
    }));
    const long = `We currently do not have sufficient capacity in the Availability Zone you requested. ${'Our system will be working on provisioning additional capacity. '.repeat(6)}`;
    ec2Mock.on(RunInstancesCommand).rejects(ec2Error('InsufficientInstanceCapacity', long, 500));
    const props = {
      ...PROPS,
      InstanceTypes: types,
      Subnets: azs.map((AvailabilityZone) => ({
        SubnetId: `subnet-${AvailabilityZone.slice(-1)}`,
        AvailabilityZone,
      })),
    };
    const lines: string[] = [];

    const failure = await withCappedReason(
      () => handle({ RequestType: 'Create', RequestId: REQUEST_ID, ResourceProperties: props }, deps()),
      (line) => lines.push(line),
    ).then(
      () => undefined,
      (e: Error) => e,
    );

    const full = lines.join('\n');
    expect(full.length).toBeGreaterThan(6000);
    expect(full).toContain('| us-west-2f | g5.12xlarge | InsufficientInstanceCapacity |');
    expect(failure?.message.length).toBeLessThanOrEqual(REASON_LIMIT);
    expect(failure?.message).toMatch(
      /^No instance launched: every offered Availability Zone failed for g6\.12xlarge, g6\.24xlarge, g6\.48xlarge, g6e\.12xlarge, g5\.12xlarge/,
    );
    expect(failure?.message).toContain(
      "30 attempts, by error code (the full table is in the launch function's log):",
    );
    expect(failure?.message).toMatch(
      /\n- InsufficientInstanceCapacity x30: us-west-2a \(g6\.12xlarge\), .*us-west-2f \(g5\.12xlarge\)\. We currently/,
    );
    expect(failure?.name).toBe('CapacityLaunchError');
  });

  it('leaves a short reason alone', async () => {
    const lines: string[] = [];
    await expect(
      withCappedReason(
        () => Promise.reject(new Error('short')),
        (line) => lines.push(line),
      ),
    ).rejects.toThrow(/^short$/);
    expect(lines).toEqual([]);
  });
});
