import { describe, expect, it } from 'vitest';
import { mtlsClientGroups } from '../../../lib/network/study/mtls-groups.ts';
import { mtlsMatrixCases, strictExceptionCases } from '../../../lib/network/study/plan.ts';

describe('mtlsClientGroups', () => {
  it('puts the cases of one source in one pod, in plan order, and keeps every source apart', () => {
    for (const mesh of ['sidecar', 'ambient'] as const) {
      const groups = mtlsClientGroups(mtlsMatrixCases(mesh));
      expect(groups.map((g) => [g.id, g.cases.map((c) => c.id)])).toEqual([
        [
          'plain-default-out-of-mesh',
          ['no-policy-out-of-mesh', 'port-exception-out-of-mesh', 'strict-out-of-mesh'],
        ],
        ['mesh-good-in-mesh', ['strict-in-mesh', 'authz-allowed']],
        ['mesh-bad-in-mesh', ['authz-denied']],
        ['mesh-default-in-mesh', ['authz-default']],
      ]);
      // Every case once, each with its group's identity.
      expect(groups.flatMap((g) => g.cases)).toHaveLength(mtlsMatrixCases(mesh).length);
      for (const g of groups)
        for (const c of g.cases)
          expect([c.clientNamespace, c.serviceAccount, c.inMesh]).toEqual([
            g.clientNamespace,
            g.serviceAccount,
            g.inMesh,
          ]);
    }
    expect(mtlsClientGroups(strictExceptionCases()).map((g) => g.cases.length)).toEqual([2]);
  });

  it('tells an in-mesh and an out-of-mesh pod of the same namespace and account apart', () => {
    const [one] = strictExceptionCases();
    const groups = mtlsClientGroups([one, { ...one, id: 'same-account-in-mesh', inMesh: true }]);
    expect(groups.map((g) => g.id)).toEqual(['plain-default-out-of-mesh', 'plain-default-in-mesh']);
  });
});
