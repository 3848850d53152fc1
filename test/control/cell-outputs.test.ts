import { describe, expect, it } from 'vitest';
import { cellConstructId, cellOfOutput, cellOutputKey } from '../../lib/aws/cell-outputs.ts';
import { stackCells } from '../../lib/control/testbed.ts';

describe("a network-lab cell's stack outputs, as the study commands read them", () => {
  it('names construct ids and outputs of a cell', () => {
    expect(cellConstructId('dp-cilium')).toBe('CellDpCilium');
    expect(cellOutputKey('dp-cilium', 'InstanceId')).toBe('CellDpCiliumInstanceId');
    expect(cellOfOutput('CellDpCiliumInstanceId', 'Cell dp-cilium: its host')).toBe('dp-cilium');
    // A description naming another cell than the key, or none, is not a cell output.
    expect(cellOfOutput('CellMeshInstanceId', 'Cell dp-cilium: its host')).toBeUndefined();
    expect(cellOfOutput('InstanceId', 'The GPU host')).toBeUndefined();
  });

  it("a stack's cells are those with an InstanceId output, each once", () => {
    const out = (cell: string, name: string) => ({
      OutputKey: cellOutputKey(cell, name),
      Description: `Cell ${cell}: ...`,
    });
    expect(
      stackCells([
        out('mesh', 'InstanceId'),
        out('mesh', 'ResultsLocation'),
        out('dp-cilium', 'ResultsLocation'),
        { OutputKey: 'InstanceId', Description: 'The GPU host' },
      ]),
    ).toEqual(['mesh']);
  });
});
