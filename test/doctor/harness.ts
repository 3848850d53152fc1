import { afterEach, beforeAll, expect } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import type { BootstrapRequirement } from '../../lib/doctor/bootstrap.ts';
import { bootstrapRequirement } from '../../lib/doctor/bootstrap-requirement.ts';
import { type DoctorReport, runDoctor } from '../../lib/doctor/doctor.ts';
import type { DoctorCheck, DoctorLine } from '../../lib/doctor/model.ts';
import { type FakeAccount, mockAccount } from './fake-account.ts';

/** What the `lab doctor` test files share: the real bootstrap requirement, a run on a fake account. */

/** This project's aws-cdk-lib's requirement, read once per file (useDoctorHarness). */
export let requirement: BootstrapRequirement;
let restore: (() => void) | undefined;

/** Registers the file's hooks: read the requirement once, restore the mocks after each test. */
export function useDoctorHarness(): void {
  beforeAll(() => {
    requirement = bootstrapRequirement();
  });
  afterEach(() => {
    restore?.();
    restore = undefined;
  });
}

/** Restores these mocks after the test. */
export function track(restoreMocks: () => void): void {
  restore = restoreMocks;
}

export const DEFAULT = parseLabConfig({});

/** The server, `gpuAgents` g6.12xlarge GPU agents and a c7i.4xlarge CPU agent. */
export function withAgents(gpuAgents: number): LabConfig {
  return parseLabConfig({
    instance: { readyTimeoutMinutes: 60 },
    cluster: {
      agents: [
        { name: 'gpu', role: 'gpu', count: gpuAgents, instanceType: 'g6.12xlarge' },
        { name: 'cpu', role: 'cpu', instanceType: 'c7i.4xlarge' },
      ],
    },
    vllm: { replicas: 4 * gpuAgents },
  });
}
export const NOW = new Date('2026-12-01T12:00:00Z');

/** Runs every check against the fake account. */
export async function doctor(account: FakeAccount, config: LabConfig = DEFAULT) {
  const fake = mockAccount(account);
  track(fake.restore);
  const steps: string[] = [];
  const report = await runDoctor(fake.clients, config, {
    requirement,
    progress: (step) => steps.push(step),
    now: () => NOW,
  });
  return { report, mocks: fake.mocks, steps };
}

export function linesOf(report: DoctorReport, check: DoctorCheck): DoctorLine[] {
  return report.lines.filter((line) => line.check === check);
}

/** The one line of a check. */
export function only(report: DoctorReport, check: DoctorCheck): DoctorLine {
  const lines = linesOf(report, check);
  expect(lines).toHaveLength(1);
  return lines[0] as DoctorLine;
}
