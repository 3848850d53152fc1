/**
 * ClusterIPs E9 gives its probe Services itself (docs/facts.md §N3, "What E9 times"): the prober
 * must already be probing an address before the Service that owns it exists, so the runner picks
 * the address and creates the Service with that `spec.clusterIP`. Pure: the range and the
 * addresses in use are parameters.
 *
 * Kubernetes splits a Service range in two bands (KEP-3070): dynamic allocation takes addresses
 * from the upper band first and reaches the lower one only when the upper is full, so a static
 * address taken from the lower band does not race the API server's own choices. The lower band's
 * size is `min(max(16, size / 16), 256)` addresses from the range's base (kubernetes
 * pkg/registry/core/service/ipallocator, `calculateRangeOffset` in bitmap.go and ipallocator.go;
 * read in the repository's current source, not at the v1.36.4 tag). If an address is taken
 * anyway (a Service in a namespace the runner cannot list), the API rejects the create with 422
 * and the runner records the sample as missing: checked at run time, never assumed.
 */

/** An IPv4 CIDR as a base address (network address, as a 32-bit number) and its prefix length. */
export interface Ipv4Range {
  readonly base: number;
  readonly bits: number;
}

export function parseIpv4(address: string): number {
  const parts = address.split('.');
  if (parts.length !== 4 || parts.some((p) => !/^\d{1,3}$/.test(p) || Number(p) > 255)) {
    throw new Error(`'${address}' is not an IPv4 address`);
  }
  return parts.reduce((n, p) => n * 256 + Number(p), 0);
}

export function formatIpv4(n: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join('.');
}

export function parseServiceRange(cidr: string): Ipv4Range {
  const [address, prefix] = cidr.split('/');
  const bits = Number(prefix);
  if (prefix === undefined || !Number.isInteger(bits) || bits < 8 || bits > 30) {
    throw new Error(`network.serviceCidr must be an IPv4 CIDR with a prefix from /8 to /30, got '${cidr}'`);
  }
  const size = 2 ** (32 - bits);
  const base = Math.floor(parseIpv4(address) / size) * size;
  return { base, bits };
}

/** The static band's size: `min(max(16, size / 16), 256)`, 0 for ranges of 16 addresses or fewer. */
export function staticBandSize(range: Ipv4Range): number {
  const size = 2 ** (32 - range.bits);
  if (size <= 16) return 0;
  return Math.min(Math.max(16, Math.floor(size / 16)), 256);
}

/**
 * `count` free addresses of the range's static band, in order, skipping the network address,
 * the first address (the `kubernetes` Service), the tenth (K3s' cluster DNS, `--cluster-dns`
 * defaults to the range's .10) and every address in `used`. Throws naming the band when it has
 * too few free addresses.
 */
export function freeStaticClusterIps(cidr: string, used: Iterable<string>, count: number): string[] {
  const range = parseServiceRange(cidr);
  const band = staticBandSize(range);
  const taken = new Set(used);
  const free: string[] = [];
  for (let offset = 2; offset < band && free.length < count; offset++) {
    if (offset === 10) continue;
    const ip = formatIpv4(range.base + offset);
    if (!taken.has(ip)) free.push(ip);
  }
  if (free.length < count) {
    throw new Error(
      `the static band of ${cidr} (its first ${band} addresses) has ${free.length} free addresses, E9 needs ${count} (experiments.serviceScale.samples)`,
    );
  }
  return free;
}
