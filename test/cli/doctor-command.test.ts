import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { GetCallerIdentityCommand } from '@aws-sdk/client-sts';
import { allCustomMatcher } from 'aws-sdk-client-mock-vitest';
import 'aws-sdk-client-mock-vitest/extend';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runLab } from '../../lib/cli/program.ts';
import { exampleBlock, runExample, withExample } from '../doctor/docs-example.ts';
import { type FakeAccount, healthyAccount, mockAccount } from '../doctor/fake-account.ts';
import { captureOutput } from './capture.ts';

expect.extend(allCustomMatcher);

let restore: (() => void) | undefined;
afterEach(() => {
  restore?.();
  restore = undefined;
  vi.unstubAllEnvs();
});

async function doctor(account: FakeAccount, ...args: string[]) {
  vi.stubEnv('LAB_CONFIG', undefined);
  const fake = mockAccount(account);
  restore = fake.restore;
  const run = await captureOutput(() => runLab(['doctor', ...args]));
  return { code: run.value, stdout: run.stdout, stderr: run.stderr, mocks: fake.mocks };
}

describe('lab doctor', () => {
  it('exits 0 when no line fails; progress goes to stderr, the report to stdout', async () => {
    const run = await doctor(healthyAccount(), '--region', 'us-west-2');

    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      /^lab doctor: stack LlmGatewayLab \(llm-gateway lab\), account 123456789012, region us-west-2\n/,
    );
    expect(run.stdout).toContain(
      '9 passed, 0 warning(s), no failure: cdk deploy of LlmGatewayLab can go ahead in us-west-2.',
    );
    expect(run.stderr).toContain('lab doctor: reading the vCPU quotas (Service Quotas) ...');
    expect(run.stdout).not.toContain('...');
  });

  it('exits 1 when a line fails, and --json carries every line with ok false', async () => {
    const run = await doctor({ ...healthyAccount(), quotas: {} }, '--region', 'us-west-2', '--json');

    expect(run.code).toBe(1);
    const report = JSON.parse(run.stdout);
    expect(report).toMatchObject({
      ok: false,
      stackName: 'LlmGatewayLab',
      region: 'us-west-2',
      account: '123456789012',
    });
    expect(report.lines.filter((line: { status: string }) => line.status === 'fail')).toEqual([
      expect.objectContaining({
        check: 'quota',
        subject: 'Running On-Demand G and VT instances (L-DB2E81BA)',
      }),
    ]);
  });

  it('checks each cell of a network-lab configuration', async () => {
    vi.stubEnv('LAB_CONFIG', fileURLToPath(new URL('../../examples/network-lab.yaml', import.meta.url)));
    const fake = mockAccount(healthyAccount());
    restore = fake.restore;
    const run = await captureOutput(() => runLab(['doctor', '--region', 'us-west-2']));

    expect(run.value).toBe(0);
    expect(run.stdout).toContain('stack NetworkLab (network lab)');
    expect(run.stdout).toContain(
      'the stack needs 24 vCPUs at once (cell mesh 8 + cell dp-iptables 8 + cell dp-cilium 8)',
    );
  });

  it('--qualifier reads that bootstrap', async () => {
    const account = healthyAccount();
    const run = await doctor(
      { ...account, parameters: { ...account.parameters, '/cdk-bootstrap/lab42/version': '33' } },
      '--region',
      'us-west-2',
      '--qualifier',
      'lab42',
    );
    expect(run.stdout).toContain('PASS  bootstrap  CDKToolkit (qualifier lab42): bootstrap version 33');
    expect(run.stdout).toContain('cdk-lab42-cfn-exec-role');
  });

  it('no credentials: one line, exit 1', async () => {
    vi.stubEnv('LAB_CONFIG', undefined);
    const fake = mockAccount(healthyAccount());
    restore = fake.restore;
    fake.mocks.sts.on(GetCallerIdentityCommand).rejects(
      Object.assign(new Error('Could not load credentials from any providers'), {
        name: 'CredentialsProviderError',
      }),
    );
    const run = await captureOutput(() => runLab(['doctor', '--region', 'us-west-2']));

    expect(run.value).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(
      'lab doctor: No AWS credentials found (Could not load credentials from any providers). lab doctor uses the standard credential chain',
    );
  });

  it('no region: one line, exit 1, nothing called', async () => {
    vi.stubEnv('AWS_REGION', undefined);
    vi.stubEnv('AWS_DEFAULT_REGION', undefined);
    vi.stubEnv('AWS_PROFILE', undefined);
    vi.stubEnv('AWS_CONFIG_FILE', '/nonexistent/config');
    vi.stubEnv('AWS_SHARED_CREDENTIALS_FILE', '/nonexistent/credentials');
    vi.stubEnv('AWS_EC2_METADATA_DISABLED', 'true');
    const run = await doctor(healthyAccount());

    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      'lab doctor: No AWS region: pass --region, or set AWS_REGION or a region in your AWS profile.\n',
    );
    expect(run.mocks.sts).not.toHaveReceivedAnyCommand();
  });
});

describe('docs/first-run.md', () => {
  it('shows what lab doctor prints now (regenerate: npx tsx scripts/doctor-example.ts --write)', async () => {
    const page = readFileSync(fileURLToPath(new URL('../../docs/first-run.md', import.meta.url)), 'utf8');
    const { code, stdout } = await runExample();

    expect(code).toBe(1);
    expect(page).toBe(withExample(page, exampleBlock(stdout, code)));
  });
});
