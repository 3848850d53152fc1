import { dirname, sep } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { DATAPATHS, MESH_MODES } from '../../config/network.ts';
import {
  CELL_CONFIG_MAP,
  CELL_KEY,
  CELL_LABEL,
  type CellDescription,
  CILIUM_VALUES_KEY,
} from '../../network/topology.ts';
import { fieldPath, fileOf, type KubeObject, labelsOf, nameOf, record, text } from '../manifest.ts';
import { issueViolations } from '../schemas.ts';
import { SCHEMA, type Violation, violation } from '../violation.ts';
import { CiliumValuesSchema, isIstioKind, type ParsedCiliumValues } from './schemas.ts';

/**
 * A network-lab cell as `lab check` finds it in a folder: the `network-cell` ConfigMap says what
 * the cell is (datapath, mesh, ranges) and holds the Cilium values of a Cilium cell.
 */

const CellSchema = z.strictObject({
  name: z.string().min(1),
  datapath: z.enum(DATAPATHS),
  mesh: z.enum(MESH_MODES),
  podCidr: z.string(),
  serviceCidr: z.string(),
  smallestExpectedLatencyMs: z.number().positive(),
  lbEntriesNeeded: z.number().int().nonnegative(),
  backendsPerService: z.number().int().positive(),
});

export interface FoundCell {
  /** The ConfigMap the cell was read from. */
  readonly object: KubeObject;
  readonly cell?: CellDescription;
  readonly cilium?: ParsedCiliumValues;
  /** Schema violations of the ConfigMap's documents. */
  readonly violations: Violation[];
}

/** Whether a folder holds a network-lab cell rather than the LLM-gateway lab. */
export function isNetworkCell(objects: readonly KubeObject[]): boolean {
  return objects.some((o) => CELL_LABEL in labelsOf(o) || isIstioKind(o) || isCellConfigMap(o));
}

function isCellConfigMap(object: KubeObject): boolean {
  return object.apiVersion === 'v1' && object.kind === 'ConfigMap' && nameOf(object) === CELL_CONFIG_MAP;
}

/** The cell description, if the folder has one. */
export function findCell(objects: readonly KubeObject[]): FoundCell | undefined {
  const object = objects.find(isCellConfigMap);
  if (!object) return undefined;
  const data = record(object.data);
  const violations: Violation[] = [];
  const parsed = <T>(
    key: string,
    schema: z.ZodType<T>,
    parse: (source: string) => unknown,
  ): T | undefined => {
    const source = text(data[key]);
    if (source === undefined) return undefined;
    let document: unknown;
    try {
      document = parse(source);
    } catch (error) {
      violations.push(
        violation(object, fieldPath(['data', key]), SCHEMA, `does not parse: ${(error as Error).message}`),
      );
      return undefined;
    }
    const result = schema.safeParse(document);
    if (result.success) return result.data;
    violations.push(
      ...issueViolations(object, ['data', key], result.error.issues, `the ${key} of a network-lab cell`),
    );
    return undefined;
  };
  const cell = parsed(CELL_KEY, CellSchema, JSON.parse);
  const cilium = parsed(CILIUM_VALUES_KEY, CiliumValuesSchema, parseYaml);
  return { object, ...(cell ? { cell } : {}), ...(cilium ? { cilium } : {}), violations };
}

/**
 * A synthesized network lab is one folder per cell (`dist/<cell>/`); `lab check dist` loads them
 * all. Each cell's objects must be judged against its own `network-cell` ConfigMap, so the objects
 * are grouped by the folder of the cell ConfigMap they sit under. One group (or none) when the
 * objects hold at most one cell, or their files are unknown.
 */
export function cellGroups(objects: readonly KubeObject[]): KubeObject[][] {
  const cellDirs = objects
    .filter(isCellConfigMap)
    .map((o) => fileOf(o))
    .filter((file): file is string => file !== undefined)
    .map((file) => dirname(file));
  if (new Set(cellDirs).size < 2) return [[...objects]];
  // The deepest cell folder that holds the object's file; objects under no cell folder go alone.
  const dirs = [...new Set(cellDirs)].sort((a, b) => b.length - a.length);
  const groups = new Map<string, KubeObject[]>();
  const rest: KubeObject[] = [];
  for (const object of objects) {
    const file = fileOf(object);
    const dir = file === undefined ? undefined : dirs.find((d) => file.startsWith(`${d}${sep}`));
    if (dir === undefined) rest.push(object);
    else groups.set(dir, [...(groups.get(dir) ?? []), object]);
  }
  return [...groups.values(), ...(rest.length > 0 ? [rest] : [])];
}
