import { expect, test } from 'vitest';
import { rig } from '../install/rig.ts';
import type { FakeApiServer } from '../kube/fake-api-server.ts';

/**
 * A test file's body for test/temp.test.ts: the fake cluster rig() starts in one test is stopped
 * when that test ends, in every file of a warm worker (a hook at rig.ts's top would serve the
 * first file only).
 */
export function stopsItsRig(): void {
  let server: FakeApiServer | undefined;
  test('starts a fake cluster', async () => {
    // The network lab without the client: its rig makes no install plan and no API client, so the
    // fixture loads neither the charts (cdk8s) nor @kubernetes/client-node.
    server = (await rig({}, { lab: 'network' }, { client: false })).server;
    expect(server.listening).toBe(true);
  });
  test("the previous test's fake cluster is stopped", () => {
    expect(server?.listening).toBe(false);
  });
}
