/**
 * Kubernetes resource quantities (`500m`, `2`, `512Mi`, `1.5Gi`, `1e3`) as numbers: CPU in cores,
 * memory in bytes. Undefined when the text is not a quantity.
 */

const SUFFIXES: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

export function parseQuantity(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const match = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$/.exec(
    value.trim(),
  );
  if (!match) return undefined;
  const number = Number(match[1]);
  if (match[2]) return number * 10 ** Number(match[2].slice(1));
  return number * SUFFIXES[match[3] ?? ''];
}

const GIB = 2 ** 30;

/** `12.5` cores, `3` cores. */
export function formatCpu(cores: number): string {
  return `${Number(cores.toFixed(3))}`;
}

/** `36.5 GiB` */
export function formatMemory(bytes: number): string {
  return `${Number((bytes / GIB).toFixed(2))} GiB`;
}

export function gibToBytes(gib: number): number {
  return gib * GIB;
}
