import { z } from 'zod';
import { count, dnsLabel, pinnedImage } from './fields.ts';
import { instanceSchema } from './instance.ts';

/**
 * The network lab's settings (docs/facts.md (the network lab)): the cells it deploys, the versions it pins and
 * the parameters of its experiments (spec section 3). Strict like the rest of the configuration;
 * the rules that relate several settings are in `network-rules.ts`.
 */

/** The lab VPC's address range (lib/aws/network.ts); pod and Service ranges must stay out of it. */
export const LAB_VPC_CIDR = '10.0.0.0/16';

/** The Service data plane of a cell: kube-proxy in one of its modes (over flannel), or Cilium's eBPF replacement. */
export const DATAPATHS = ['iptables', 'nftables', 'ipvs', 'cilium'] as const;
export type Datapath = (typeof DATAPATHS)[number];

/** The service mesh of a cell: none, Istio with sidecars, or Istio ambient (ztunnel). */
export const MESH_MODES = ['none', 'sidecar', 'ambient'] as const;
export type MeshMode = (typeof MESH_MODES)[number];

const version = (example: string, description: string) =>
  z
    .string()
    .regex(/^\d+\.\d+\.\d+$/, `must be an exact release like ${example}`)
    .describe(description);

const cidr = (description: string) =>
  z
    .string()
    .regex(/^(\d{1,3}\.){3}\d{1,3}\/\d{1,2}$/, 'must be an IPv4 CIDR like 10.42.0.0/16')
    .describe(description);

const CellSchema = z.strictObject({
  name: dnsLabel('Cell name: its host, stack outputs and results prefix'),
  datapath: z.enum(DATAPATHS).describe('Service data plane: kube-proxy mode over flannel, or Cilium'),
  mesh: z.enum(MESH_MODES).default('none').describe('Istio on this cell: none, sidecar or ambient'),
  instanceType: z
    .string()
    .min(1)
    .optional()
    .describe('Instance type of this cell (default: network.instance.type, the same for every cell)'),
});
export type NetworkCell = z.infer<typeof CellSchema>;

export const NETWORK_INSTANCE = instanceSchema({
  type: 'c7i.2xlarge',
  role: 'network-lab cell',
  gpus: 0,
  gpusNote: 'none needed',
  vcpus: 8,
  quota: 'Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances',
  memoryGiB: 16,
  pricePerHourUsd: 0.357,
  // Canonical's public parameter (its SSM naming: ubuntu/<product>/<release>/stable/current/<arch>/hvm/
  // <volume>/ami-id); resolved at deploy time, which fails naming the parameter if it does not exist.
  amiParameter: '/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id',
  amiNote: 'Public SSM parameter holding the Ubuntu Server 24.04 AMI (kernel 6.8+: nftables needs 5.13)',
  rootVolumeGiB: 40,
  minRootVolumeGiB: 20,
  rootVolumeNote: 'Encrypted gp3 root volume: images and results',
});

const CiliumSchema = z
  .strictObject({
    version: version(
      '1.20.2',
      'Cilium Helm chart and image release (quay.io/cilium/cilium:v<version>)',
    ).default('1.20.2'),
    ipam: z
      .enum(['kubernetes', 'cluster-pool'])
      .default('kubernetes')
      .describe("IPAM mode: kubernetes uses K3s's pod CIDRs (network.podCidr)"),
    clusterPoolCidr: cidr(
      "Pod range of ipam cluster-pool (Cilium's own default 10.0.0.0/8 overlaps the lab VPC)",
    ).default('10.0.0.0/8'),
    lbMapMax: count(
      'bpf.lbMapMax: LB map entries, sized before install (resizing disrupts connections)',
    ).default(65_536),
    socketLBHostNamespaceOnly: z
      .boolean()
      .default(false)
      .describe('socketLB.hostNamespaceOnly; must be true when Istio runs on a Cilium cell'),
    cniExclusive: z
      .boolean()
      .default(true)
      .describe('cni.exclusive; must be false when Istio runs on a Cilium cell (Istio chains its CNI)'),
  })
  .prefault({});

const IstioSchema = z
  .strictObject({
    version: version('1.31.1', 'Istio Helm charts (base, istiod; cni, ztunnel for ambient)').default(
      '1.31.1',
    ),
  })
  .prefault({});

const FortioSchema = z
  .strictObject({
    image: pinnedImage('fortio image (its Docker tags have no "v")').default('fortio/fortio:1.75.2'),
    connections: count('-c: connections of every latency run').default(16),
    qps: count('-qps of the fixed-rate runs').default(500),
    fixedRateSeconds: count('-t of the fixed-rate runs (E1, E3, E5, calibration)').default(25),
    saturationSeconds: count('-t of the saturation runs (-qps 0) and E4').default(20),
    resolutionSeconds: z
      .number()
      .positive()
      .default(0.000_01)
      .describe(
        '-r: histogram resolution; the default 0.001 turns sub-millisecond percentiles into bucket positions',
      ),
    percentiles: z.array(z.number().gt(0).lt(100)).min(1).default([50, 90, 99]).describe('-p'),
  })
  .prefault({});

const ExperimentsSchema = z
  .strictObject({
    smallestExpectedLatencyMs: z
      .number()
      .positive()
      .default(0.1)
      .describe(
        'Smallest latency a run is expected to measure (pod to pod on one node); -r must be a tenth of it',
      ),
    repeats: z
      .strictObject({
        fixedRate: count('Repeats of each fixed-rate arm (E1, E3, E4)').default(5),
        saturation: count('Repeats of each saturation arm (E1s, E3)').default(3),
        protocols: count('Repeats of the gRPC, download and SSE arms (E5-E7)').default(3),
        calibration: count('Repeats of the calibration run on each cell').default(3),
      })
      .prefault({}),
    largeBodyMiB: count('Size of the E6 download').default(100),
    sse: z
      .strictObject({
        events: count('Events per E7 stream').default(200),
        intervalMs: count('Interval between events').default(20),
      })
      .prefault({}),
    serviceScale: z
      .strictObject({
        steps: z
          .array(z.number().int().nonnegative())
          .min(1)
          .default([0, 100, 1_000, 5_000, 10_000])
          .describe('Service counts of E9, in increasing order'),
        samples: count('Prober samples per step (median and p90)').default(20),
        proberAttemptTimeoutMs: count(
          'Connect-attempt timeout of the prober; a coarse one quantizes latencies',
        ).default(20),
        createConcurrency: count('Services created at once through the API').default(50),
        backendsPerService: count(
          'Endpoints behind each Service (one one-replica backend by default)',
        ).default(1),
      })
      .prefault({}),
    conntrack: z
      .strictObject({
        limits: z
          .array(z.number().int().min(256))
          .default([2_048, 1_024])
          .describe('nf_conntrack_max values of E10, after a step at the host default'),
        connections: count('Simultaneous loopback connections per step').default(4_000),
        connectTimeoutSeconds: count('Connect timeout of each connection').default(5),
        baselineMax: count('A step starts only when fewer conntrack entries than this exist').default(500),
      })
      .prefault({}),
  })
  .prefault({});

export const NetworkSchema = z
  .strictObject({
    instance: NETWORK_INSTANCE,
    cells: z
      .array(CellSchema)
      .min(1)
      .default([
        { name: 'mesh', datapath: 'iptables', mesh: 'sidecar' },
        { name: 'dp-iptables', datapath: 'iptables', mesh: 'none' },
        { name: 'dp-cilium', datapath: 'cilium', mesh: 'none' },
      ])
      .describe('One single-node K3s cluster per cell; add dp-nftables or dp-ipvs cells as needed'),
    podCidr: cidr("K3s --cluster-cidr (and Cilium's pods with ipam kubernetes)").default('10.42.0.0/16'),
    serviceCidr: cidr('K3s --service-cidr').default('10.43.0.0/16'),
    cilium: CiliumSchema,
    istio: IstioSchema,
    probeImage: pinnedImage(
      "Image of the privileged host commands (the runner's short Jobs, network.hostProbe): conntrack-tools, iptables, nftables, ipvsadm, curl",
    ).default('nicolaka/netshoot:v0.16'),
    // Opt-in: the runner never uses it (it runs host commands as short privileged Jobs), and a
    // standing privileged host-network pod is an exposure nobody needs unless inspecting by hand.
    hostProbe: z
      .boolean()
      .default(false)
      .describe(
        "Deploy a standing privileged host-network probe pod (network.probeImage) on every cell, for an operator's kubectl exec to inspect the node's iptables/nftables/ipvs rules and conntrack by hand; the runner does not need it",
      ),
    fortio: FortioSchema,
    experiments: ExperimentsSchema,
  })
  .prefault({});

export type NetworkConfig = z.output<typeof NetworkSchema>;
