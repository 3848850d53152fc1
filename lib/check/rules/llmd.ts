import { SCORES_LINE_VERBOSITY } from '../../study/precise-evidence.ts';
import { flagValue } from '../command-line.ts';
import { eppFlags, eppSchedulerConfig, pluginsOf, type SchedulerConfig } from '../epp-config.ts';
import {
  isRecord,
  type Json,
  list,
  nameOf,
  namespaceOf,
  record,
  sameNamespace,
  selects,
  stringMap,
  text,
} from '../manifest.ts';
import { type ContainerRef, mainInvocation, ofKind, type Testbed } from '../testbed.ts';
import { type Note, note, type Violation, violation } from '../violation.ts';
import { servedNames } from './servers.ts';

/**
 * Lesson 5 for llm-d's precise prefix-cache scorer (docs/facts.md §3.7): the index it scores from is
 * filled by the replicas' KV events, so replicas and indexer must hash blocks the same way and
 * name the model the same way, and the scorer must be able to load its tokenizer.
 */

export const PRECISE_SCORER = 'precise-prefix-cache-scorer';
/** llm-d-kv-cache-manager v0.3.2 kvblock.DefaultTokenProcessorConfig: blockSize 16, hashSeed "". */
const INDEXER_DEFAULT_BLOCK_SIZE = 16;
/** vLLM's block size on CUDA when `--block-size` is not given. */
const VLLM_DEFAULT_BLOCK_SIZE = 16;

interface Indexer {
  readonly epp: ContainerRef;
  readonly config: SchedulerConfig;
  /** `data["x.yaml"].plugins[1].parameters.indexerConfig` */
  readonly field: string;
  readonly blockSize: number;
  readonly hashSeed: string;
  readonly tokenizersCacheDir: string | undefined;
}

/** Every EPP whose scheduler configuration instantiates the precise scorer, with its indexer settings. */
function preciseIndexers(testbed: Testbed): Indexer[] {
  return testbed.epps.flatMap((epp) => {
    const config = eppSchedulerConfig(testbed, epp);
    if (!config) return [];
    return pluginsOf(config)
      .filter(({ plugin }) => plugin.type === PRECISE_SCORER)
      .map(({ plugin, index }) => {
        // JSON names from kvcache.Config, kvblock.TokenProcessorConfig and tokenization.Config
        // (which embeds HFTokenizerConfig, so tokenizersCacheDir sits in tokenizersPoolConfig).
        const indexer = record(record(plugin.parameters).indexerConfig);
        const tokens = record(indexer.tokenProcessorConfig);
        const blockSize =
          typeof tokens.blockSize === 'number' ? tokens.blockSize : INDEXER_DEFAULT_BLOCK_SIZE;
        return {
          epp,
          config,
          field: `${config.field}.plugins[${index}].parameters.indexerConfig`,
          blockSize,
          hashSeed: text(tokens.hashSeed) ?? '',
          tokenizersCacheDir: text(record(indexer.tokenizersPoolConfig).tokenizersCacheDir),
        };
      });
  });
}

/** The replica containers of the EPP's InferencePool. */
function poolReplicas(testbed: Testbed, epp: ContainerRef): ContainerRef[] {
  const flags = eppFlags(epp);
  const name = flags.values.get('pool-name');
  const namespace = flags.values.get('pool-namespace') ?? epp.pod.namespace;
  const pool = ofKind(testbed, 'InferencePool').find(
    (p) => nameOf(p) === name && sameNamespace(namespaceOf(p), namespace),
  );
  if (!pool) return [];
  const selector = record(record(pool.spec).selector);
  const labels = stringMap(isRecord(selector.matchLabels) ? selector.matchLabels : selector);
  return testbed.servers.filter(
    (ref) => sameNamespace(ref.pod.namespace, namespaceOf(pool)) && selects(labels, ref.pod.labels),
  );
}

interface KvEvents {
  readonly enabled: boolean;
  readonly topic?: string;
  readonly parseError?: string;
}

function kvEventsOf(words: readonly string[]): KvEvents | undefined {
  const source = flagValue(words, '--kv-events-config');
  if (source === undefined) return undefined;
  try {
    const config: unknown = JSON.parse(source);
    const fields = record(config);
    return { enabled: fields.enable_kv_cache_events === true, topic: text(fields.topic) };
  } catch (error) {
    return { enabled: false, parseError: (error as Error).message };
  }
}

function envValue(ref: ContainerRef, name: string): Json | undefined {
  return list(ref.container.env)
    .map(record)
    .find((entry) => entry.name === name);
}

/** The four llm-d invariants between a precise scorer's indexer and the replicas it scores. */
export function llmdReplicasMatchIndexer(testbed: Testbed): Violation[] {
  return preciseIndexers(testbed).flatMap((indexer) =>
    poolReplicas(testbed, indexer.epp).flatMap((replica) => {
      const invocation = mainInvocation(replica);
      if (!invocation) return [];
      const object = replica.pod.object;
      const eppName = nameOf(indexer.epp.pod.object);
      const found: Violation[] = [];
      const add = (field: string, message: string) => found.push(violation(object, field, 5, message));
      const events = kvEventsOf(invocation.words);
      if (!events?.enabled) {
        add(
          invocation.field,
          events?.parseError
            ? `--kv-events-config is not valid JSON (${events.parseError}): the replica publishes no KV events, so ${eppName}'s ${PRECISE_SCORER} scores every pod 0`
            : `publishes no KV events (--kv-events-config with "enable_kv_cache_events": true): ${eppName}'s ${PRECISE_SCORER} has an empty index and scores every pod 0`,
        );
        return found;
      }
      const blockSize = Number(flagValue(invocation.words, '--block-size') ?? VLLM_DEFAULT_BLOCK_SIZE);
      if (blockSize !== indexer.blockSize) {
        add(
          invocation.field,
          `--block-size is ${blockSize} but ${eppName}'s indexer blockSize is ${indexer.blockSize}: the replica hashes other blocks than the scorer looks up, so no prefix ever matches; make them equal`,
        );
      }
      const seed = envValue(replica, 'PYTHONHASHSEED');
      if (seed?.value !== indexer.hashSeed) {
        const actual =
          seed === undefined
            ? 'is not set (vLLM then seeds its block hashes randomly)'
            : `is ${JSON.stringify(seed.value ?? '(from a reference)')}`;
        add(
          `${replica.path}.env`,
          `PYTHONHASHSEED ${actual} but ${eppName}'s indexer hashSeed is ${JSON.stringify(indexer.hashSeed)}: block hashes differ and no prefix ever matches; set both to the same value`,
        );
      }
      const served = servedNames(invocation.words);
      const topic = events.topic ?? '';
      const parts = topic.split('@');
      // llm-d-kv-cache-manager v0.3.2: the subscriber filters on "kv@" (kvevents.DefaultConfig
      // TopicFilter) and splits `kv@<pod>@<model>` (zmqSubscriber.runSubscriber); the scorer looks
      // blocks up by the request's model, the served name.
      if (parts.length !== 3 || parts[0] !== 'kv') {
        add(
          invocation.field,
          `the KV-event topic ${JSON.stringify(topic)} is not kv@<pod IP>@<served name>: the indexer drops every event`,
        );
      } else if (!served.includes(parts[2])) {
        add(
          invocation.field,
          `the KV-event topic's model part is "${parts[2]}", but requests carry the served name (${served.join(', ') || 'none'}): the index keys never match the scorer's look-ups; use kv@$(POD_IP)@${served[0] ?? '<served name>'}`,
        );
      }
      return found;
    }),
  );
}

const READ_ONLY_SOURCES = ['configMap', 'secret', 'projected', 'downwardAPI'];

/**
 * The scorer loads `<tokenizersCacheDir>/<model>/tokenizer.json` and writes there what is
 * missing (daulet/tokenizers v1.22.1 FromPretrained). Unset, the folder is a build-time path the
 * image (UID 65532) cannot create, and the request blocks inside the EPP. HF_TOKEN replaces the
 * folder option altogether (llm-d-kv-cache-manager v0.3.2 NewCachedHFTokenizer).
 */
export function llmdTokenizerDirWritable(testbed: Testbed): Violation[] {
  return preciseIndexers(testbed).flatMap((indexer) => {
    const epp = indexer.epp;
    const eppRef = `${epp.pod.object.kind} ${nameOf(epp.pod.object)}`;
    const dir = indexer.tokenizersCacheDir;
    const found: Violation[] = [];
    if (envValue(epp, 'HF_TOKEN') !== undefined) {
      found.push(
        violation(
          epp.pod.object,
          `${epp.path}.env`,
          5,
          `HF_TOKEN is set: in llm-d-kv-cache-manager v0.3.2 a token replaces the tokenizersCacheDir option, so the scorer ignores the seeded folder and downloads the request's model name from Hugging Face`,
        ),
      );
    }
    if (dir === undefined) {
      found.push(
        violation(
          indexer.config.object,
          `${indexer.field}.tokenizersPoolConfig.tokenizersCacheDir`,
          5,
          `is not set: the scorer's default folder is a path the image (UID 65532) cannot create ("mkdir /go: permission denied") and every request of ${eppRef} blocks; point it at a writable volume`,
        ),
      );
      return found;
    }
    const volumes = list(epp.pod.spec.volumes).map(record);
    const mount = list(epp.container.volumeMounts)
      .map(record)
      .filter((m) => {
        const path = text(m.mountPath)?.replace(/\/+$/, '');
        return path !== undefined && (dir === path || dir.startsWith(`${path}/`));
      })
      .sort((a, b) => String(b.mountPath).length - String(a.mountPath).length)[0];
    const volume = mount ? volumes.find((v) => v.name === mount.name) : undefined;
    const readOnlySource = volume ? READ_ONLY_SOURCES.find((source) => source in volume) : undefined;
    const problem = !mount
      ? 'no volume is mounted there, so it lies on the image filesystem, which UID 65532 cannot write'
      : mount.readOnly === true
        ? `volume ${String(mount.name)} is mounted readOnly`
        : !volume
          ? `volume ${String(mount.name)} is not defined in the pod`
          : readOnlySource
            ? `volume ${String(mount.name)} is a ${readOnlySource} volume, always read-only`
            : undefined;
    if (problem) {
      found.push(
        violation(
          epp.pod.object,
          `${epp.path}.volumeMounts`,
          5,
          `tokenizersCacheDir ${dir} is not writable: ${problem}; the scorer cannot create ${dir}/<model> and every request blocks; mount an emptyDir there`,
        ),
      );
    }
    return found;
  });
}

/** GAIE v1.0.0 `logging.DEFAULT`: the EPP's `-v` when none is given (cmd/epp/runner/runner.go). */
const EPP_DEFAULT_VERBOSITY = 2;

/**
 * The runner's evidence that the precise scorer matched is its "Got pod scores" line, logged only at
 * `--v 4` or more (docs/facts.md §3.7); `--zap-log-level`, when given, replaces `-v`. Below that the
 * run is not invalid, so this is a note: its matching will be recorded as not observable.
 */
export function llmdScorerEvidenceNotes(testbed: Testbed): Note[] {
  const epps = new Set(preciseIndexers(testbed).map((indexer) => indexer.epp));
  return [...epps].flatMap((epp) => {
    const flags = eppFlags(epp);
    const zapLevel = flags.values.get('zap-log-level');
    const verbosity = Number(zapLevel ?? flags.values.get('v') ?? EPP_DEFAULT_VERBOSITY);
    if (Number.isInteger(verbosity) && verbosity >= SCORES_LINE_VERBOSITY) return [];
    const setting = zapLevel !== undefined ? `--zap-log-level ${zapLevel}` : `--v ${verbosity}`;
    return [
      note(
        epp.pod.object,
        `${nameOf(epp.pod.object)} runs at ${setting}: its ${PRECISE_SCORER} logs "Got pod scores" only at --v ${SCORES_LINE_VERBOSITY} or more, so the runner cannot tell whether a look-up ever found blocks and records it as not observable`,
      ),
    ];
  });
}
