import { describe, expect, it } from 'vitest';
import { hostLabel, labHostLines } from '../../lib/control/lab-hosts.ts';

const NOW = new Date('2025-10-14T10:00:00.000Z');
const HOUR_AGO = new Date('2025-10-14T09:00:00.000Z');
const prices: Record<string, number> = { 'g6.12xlarge': 4.602, 'g6.xlarge': 0.805 };
const priceOf = (type: string) => prices[type];

describe('lab status host lines', () => {
  it('names each host by the launch that made it', () => {
    expect(hostLabel('CapacityLaunch1A2B3C4D')).toBe('server');
    expect(hostLabel('AgentGpu1Launch9F8E7D6C')).toBe('AgentGpu1');
    expect(hostLabel('CellDpCiliumLaunchResourceC0FFEE12')).toBe('CellDpCilium');
    expect(hostLabel(undefined)).toBe('untagged');
  });

  it('a stopped host bills no instance hours; an unknown type says so; the total adds the billing ones', () => {
    const lines = labHostLines(
      [
        {
          instanceId: 'i-1',
          instanceType: 'g6.12xlarge',
          state: 'running',
          vcpus: 48,
          labResource: 'CapacityLaunch1A2B3C4D',
          availabilityZone: 'us-west-2b',
          launchTime: HOUR_AGO,
        },
        { instanceId: 'i-2', instanceType: 'g6.xlarge', state: 'stopped', vcpus: 4, launchTime: HOUR_AGO },
        { instanceId: 'i-3', instanceType: 'x9.huge', state: 'pending', vcpus: 0 },
      ],
      priceOf,
      NOW,
    );
    expect(lines).toEqual([
      'hosts:     3 live, 4.60 USD/h on demand together, about 4.60 USD so far (instances only)',
      '  server: i-1 g6.12xlarge in us-west-2b, running, up 1h00m00s, 4.60 USD/h, about 4.60 USD so far',
      '  untagged: i-2 g6.xlarge in AZ unknown, stopped, up 1h00m00s, 0.81 USD/h, about 0.00 USD so far',
      '  untagged: i-3 x9.huge in AZ unknown, pending, launch time unknown, price unknown',
    ]);
  });
});
