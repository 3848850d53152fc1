import { DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import { doctorPassed } from '../../lib/doctor/doctor.ts';
import { ACCOUNT, type FakeAccount, healthyAccount } from './fake-account.ts';
import { doctor, only, useDoctorHarness } from './harness.ts';

/**
 * The asset-key line: the CDK asset bucket's key, as the bootstrap stack's FileAssetsBucketKmsKeyId
 * parameter names it (aws-cdk-cli bootstrap-template.yaml), against `aws.assetKeyArns`.
 */

useDoctorHarness();

const KEY_ID = '1234abcd-12ab-34cd-56ef-1234567890ab';
const KEY_ARN = `arn:aws:kms:us-west-2:${ACCOUNT}:key/${KEY_ID}`;

/** An account bootstrapped with `cdk bootstrap --bootstrap-kms-key-id <key>` (or another key setting). */
function bootstrappedWith(assetKey: string, createdKeyArn?: string): FakeAccount {
  const account = healthyAccount();
  return {
    ...account,
    stacks: {
      CDKToolkit: {
        status: 'UPDATE_COMPLETE',
        version: '33',
        assetKey,
        ...(createdKeyArn ? { createdKeyArn } : {}),
      },
    },
  };
}

const naming = (...assetKeyArns: string[]) => parseLabConfig({ aws: { assetKeyArns } });

describe('lab doctor: the key of the CDK asset bucket', () => {
  it('pass: a plain cdk bootstrap (the AWS managed key) needs no key setting', async () => {
    const { report, mocks } = await doctor(healthyAccount());
    expect(only(report, 'asset-key')).toMatchObject({
      status: 'pass',
      subject: 'CDKToolkit asset bucket',
      message: expect.stringContaining('AWS managed key aws/s3'),
    });
    expect(mocks.cloudFormation).toHaveReceivedCommandWith(DescribeStacksCommand, {
      StackName: 'CDKToolkit',
    });
  });

  it("pass: --bootstrap-customer-key (the bootstrap's own key, usable by the account through S3)", async () => {
    const created = `arn:aws:kms:us-west-2:${ACCOUNT}:key/0000aaaa-11bb-22cc-33dd-444455556666`;
    const { report } = await doctor(bootstrappedWith('', created));
    expect(only(report, 'asset-key')).toMatchObject({
      status: 'pass',
      message: expect.stringContaining(`the key cdk bootstrap created (${created})`),
    });
  });

  it('fail: --bootstrap-kms-key-id with a key the configuration does not name, with the ARN to add', async () => {
    const { report } = await doctor(bootstrappedWith(KEY_ID));
    const line = only(report, 'asset-key');
    expect(line).toMatchObject({
      status: 'fail',
      message: expect.stringContaining(`customer-managed key ${KEY_ID}`),
      fix: expect.stringContaining(`add ${KEY_ARN} to aws.assetKeyArns`),
    });
    expect(doctorPassed(report)).toBe(false);
  });

  it('pass: the configuration names the key, given by id or by ARN in the bootstrap', async () => {
    for (const assetKey of [KEY_ID, KEY_ARN]) {
      const { report } = await doctor(bootstrappedWith(assetKey), naming(KEY_ARN));
      expect(only(report, 'asset-key')).toMatchObject({
        status: 'pass',
        message: expect.stringContaining(`customer-managed key ${KEY_ARN}, which aws.assetKeyArns names`),
      });
    }
  });

  it('fail: another key named than the one the bootstrap uses', async () => {
    const other = `arn:aws:kms:us-west-2:${ACCOUNT}:key/99999999-12ab-34cd-56ef-1234567890ab`;
    const { report } = await doctor(bootstrappedWith(KEY_ARN), naming(other));
    expect(only(report, 'asset-key').status).toBe('fail');
  });

  it('warn: an alias cannot be matched; the fix says how to find its key', async () => {
    const { report } = await doctor(bootstrappedWith('alias/lab-assets'));
    expect(only(report, 'asset-key')).toMatchObject({
      status: 'warn',
      fix: expect.stringContaining('aws kms describe-key --key-id alias/lab-assets --region us-west-2'),
    });
  });

  it("warn: a named key of another region grants nothing in the caller's", async () => {
    const elsewhere = `arn:aws:kms:eu-west-1:${ACCOUNT}:key/${KEY_ID}`;
    const { report } = await doctor(healthyAccount(), naming(elsewhere));
    expect(only(report, 'asset-key')).toMatchObject({
      status: 'warn',
      message: expect.stringContaining('not in us-west-2'),
    });
  });

  it('warn (not checked): the caller may not read the bootstrap stack', async () => {
    const { report } = await doctor({ ...healthyAccount(), denied: ['cloudformation:DescribeStacks'] });
    expect(only(report, 'asset-key')).toMatchObject({
      status: 'warn',
      message: 'not checked: the caller may not call cloudformation:DescribeStacks (AccessDenied)',
    });
  });
});

describe('the aws.assetKeyArns setting', () => {
  it('takes key ARNs, multi-region ones too', () => {
    const mrk = `arn:aws:kms:us-west-2:${ACCOUNT}:key/mrk-1234abcd12ab34cd56ef1234567890ab`;
    expect(naming(KEY_ARN, mrk).aws.assetKeyArns).toEqual([KEY_ARN, mrk]);
    expect(parseLabConfig({}).aws.assetKeyArns).toEqual([]);
  });

  it('refuses an alias or a bare key id, naming the setting, the value and the form wanted', () => {
    for (const bad of ['alias/lab-assets', KEY_ID, `arn:aws:kms:us-west-2:${ACCOUNT}:alias/lab-assets`]) {
      expect(() => naming(bad)).toThrow(
        /aws\.assetKeyArns\[0\].*is not a KMS key ARN; give the key's ARN like arn:aws:kms:/s,
      );
      expect(() => naming(bad)).toThrow(JSON.stringify(bad));
    }
  });
});
