/**
 * fortio's JSON result (`fortio load -json`), typed from fortio v1.75.2's Go structs, and the few
 * readings the network study takes from it. Field names are fortio's own (Go's encoding/json
 * writes exported fields under their Go names). Units, as fortio writes them:
 * - every histogram value (`Min`, `Max`, `Sum`, `Avg`, `StdDev`, bucket `Start`/`End`,
 *   percentile `Value`) is in SECONDS (periodic/periodic.go `runOne` records each call's
 *   `time.Since(fStart).Seconds()`);
 * - `ActualDuration`, `Offset` and `HTTPReqTimeOut` are Go `time.Duration`s: integer NANOSECONDS;
 * - `RequestedQPS` is a STRING: `"%.9g"` of `-qps`, or `"max"` for `-qps 0`
 *   (periodic/periodic.go, `Run` and `runQPSSetup`);
 * - `Resolution` (HTTP runs only) is `-r` in seconds (fhttp/httprunner.go `RunHTTPTest` copies the
 *   runner's resolution into `HTTPOptions.Resolution` when it is not set).
 */

/** One bucket of a histogram (stats/stats.go `Bucket`, which embeds `Interval`). */
export interface FortioBucket {
  /** Seconds. The first bucket starts at the histogram's `Min`. */
  readonly Start: number;
  /** Seconds. The last bucket ends at the histogram's `Max`. */
  readonly End: number;
  /** CUMULATIVE percent of the samples up to and including this bucket (0-100). */
  readonly Percent: number;
  /** Samples in this bucket (count). */
  readonly Count: number;
}

/** stats/stats.go `Percentile`: `Percentile` in percent (50, 90, 99), `Value` in seconds. */
export interface FortioPercentile {
  readonly Percentile: number;
  readonly Value: number;
}

/**
 * stats/stats.go `HistogramData`. An empty histogram (no samples) has `Count` 0, zeros, `Data`
 * null in the file (a nil Go slice; parsed to []) and no `Percentiles` (omitempty).
 */
export interface FortioHistogram {
  readonly Count: number;
  readonly Min: number;
  readonly Max: number;
  readonly Sum: number;
  readonly Avg: number;
  readonly StdDev: number;
  readonly Data: readonly FortioBucket[];
  readonly Percentiles: readonly FortioPercentile[];
}

/** periodic/periodic.go `RunnerResults` (with the embedded jrpc.ServerReply), common to every run. */
export interface FortioRunnerResults {
  /** `HTTP`, or `GRPC Ping` / `GRPC Health for '...'` (fgrpc/grpcrunner.go `RunGRPCTest`). */
  readonly RunType: string;
  readonly Labels: string;
  /** RFC 3339 time (a Go `time.Time`). */
  readonly StartTime: string;
  /** `"%.9g"` of `-qps`, or `"max"` at saturation (`-qps 0`). */
  readonly RequestedQPS: string;
  /** `-t` as Go prints a duration (`25s`), or `exactly N calls`. */
  readonly RequestedDuration: string;
  /** Calls per second over the run: calls / elapsed seconds. */
  readonly ActualQPS: number;
  /** Elapsed time of the run, NANOSECONDS. */
  readonly ActualDuration: number;
  /** Connections (goroutines) that ran; fortio may lower `-c` for very short runs. */
  readonly NumThreads: number;
  readonly Version: string;
  /** Every call's duration, errors included (seconds). */
  readonly DurationHistogram: FortioHistogram;
  /** Durations of the calls that failed (seconds); Count 0 when none did. */
  readonly ErrorsDurationHistogram: FortioHistogram;
  readonly Exactly: number;
  readonly Jitter: boolean;
  readonly Uniform: boolean;
  readonly NoCatchUp: boolean;
  /** jrpc.ServerReply `error` (omitempty): true when the run did not run, e.g. aborted before start. */
  readonly error?: boolean;
  readonly message?: string;
}

/** fhttp/httprunner.go `HTTPRunnerResults` (with the embedded `HTTPOptions`). */
export interface FortioHttpResult extends FortioRunnerResults {
  /** HTTP status -> calls (a Go map[int]int64: keys are decimal strings; -1 is a socket error). */
  readonly RetCodes: Readonly<Record<string, number>>;
  readonly URL: string;
  /** `-keepalive=false` sets it (bincommon/commonflags.go). */
  readonly DisableKeepAlive: boolean;
  /** `-r` in seconds (see the file comment). */
  readonly Resolution: number;
  /** Sockets opened over the run, all connections together (count). */
  readonly SocketCount: number;
  /** Sockets opened per connection (counts); null when none ran. */
  readonly Sockets: readonly number[];
  /** Response body + header sizes (bytes), when present. */
  readonly Sizes?: FortioHistogram;
  readonly HeaderSizes?: FortioHistogram;
}

/** fgrpc/grpcrunner.go `GRPCRunnerResults`. */
export interface FortioGrpcResult extends FortioRunnerResults {
  /** Health status name -> calls (fgrpc `HealthResultMap`): `SERVING` per success, `ERROR` per failed call. */
  readonly RetCodes: Readonly<Record<string, number>>;
  readonly Destination: string;
  readonly Streams: number;
  /** `-ping`: the calls were fortio's Ping, not health checks. */
  readonly Ping: boolean;
}

export type FortioResult = FortioHttpResult | FortioGrpcResult;

// ---- parsing -----------------------------------------------------------------------------------

type Json = Record<string, unknown>;

function fail(path: string, expected: string, value: unknown): never {
  const got = value === undefined ? 'missing' : `got ${JSON.stringify(value)}`;
  throw new Error(`fortio result: ${path} must be ${expected}, ${got}`);
}

function objectAt(value: unknown, path: string): Json {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(path, 'an object', value);
  return value as Json;
}

function numberAt(record: Json, key: string, path: string): number {
  const value = record[key];
  if (typeof value !== 'number' || !Number.isFinite(value)) fail(`${path}${key}`, 'a number', value);
  return value;
}

function stringAt(record: Json, key: string, path: string): string {
  const value = record[key];
  if (typeof value !== 'string') fail(`${path}${key}`, 'a string', value);
  return value;
}

function booleanAt(record: Json, key: string, path: string): boolean {
  const value = record[key];
  if (typeof value !== 'boolean') fail(`${path}${key}`, 'true or false', value);
  return value;
}

/** A Go slice: an array, or null for a nil slice. */
function sliceAt(record: Json, key: string, path: string): readonly unknown[] {
  const value = record[key];
  if (value === null) return [];
  if (!Array.isArray(value)) fail(`${path}${key}`, 'an array or null', value);
  return value;
}

function countsAt(record: Json, key: string, path: string): Record<string, number> {
  const map = objectAt(record[key], `${path}${key}`);
  const counts: Record<string, number> = {};
  for (const name of Object.keys(map)) counts[name] = numberAt(map, name, `${path}${key}.`);
  return counts;
}

function parseHistogram(value: unknown, path: string): FortioHistogram {
  const record = objectAt(value, path);
  const at = `${path}.`;
  const data = sliceAt(record, 'Data', at).map((entry, index) => {
    const bucket = objectAt(entry, `${at}Data[${index}]`);
    const where = `${at}Data[${index}].`;
    return {
      Start: numberAt(bucket, 'Start', where),
      End: numberAt(bucket, 'End', where),
      Percent: numberAt(bucket, 'Percent', where),
      Count: numberAt(bucket, 'Count', where),
    };
  });
  const percentiles = record.Percentiles === undefined ? [] : sliceAt(record, 'Percentiles', at);
  return {
    Count: numberAt(record, 'Count', at),
    Min: numberAt(record, 'Min', at),
    Max: numberAt(record, 'Max', at),
    Sum: numberAt(record, 'Sum', at),
    Avg: numberAt(record, 'Avg', at),
    StdDev: numberAt(record, 'StdDev', at),
    Data: data,
    Percentiles: percentiles.map((entry, index) => {
      const percentile = objectAt(entry, `${at}Percentiles[${index}]`);
      const where = `${at}Percentiles[${index}].`;
      return {
        Percentile: numberAt(percentile, 'Percentile', where),
        Value: numberAt(percentile, 'Value', where),
      };
    }),
  };
}

function parseRunnerResults(record: Json): FortioRunnerResults {
  const optional = <T>(key: string, read: (r: Json, k: string, p: string) => T): T | undefined =>
    record[key] === undefined ? undefined : read(record, key, '');
  const error = optional('error', booleanAt);
  const message = optional('message', stringAt);
  return {
    RunType: stringAt(record, 'RunType', ''),
    Labels: stringAt(record, 'Labels', ''),
    StartTime: stringAt(record, 'StartTime', ''),
    RequestedQPS: stringAt(record, 'RequestedQPS', ''),
    RequestedDuration: stringAt(record, 'RequestedDuration', ''),
    ActualQPS: numberAt(record, 'ActualQPS', ''),
    ActualDuration: numberAt(record, 'ActualDuration', ''),
    NumThreads: numberAt(record, 'NumThreads', ''),
    Version: stringAt(record, 'Version', ''),
    DurationHistogram: parseHistogram(record.DurationHistogram, 'DurationHistogram'),
    ErrorsDurationHistogram: parseHistogram(record.ErrorsDurationHistogram, 'ErrorsDurationHistogram'),
    Exactly: numberAt(record, 'Exactly', ''),
    Jitter: booleanAt(record, 'Jitter', ''),
    Uniform: booleanAt(record, 'Uniform', ''),
    NoCatchUp: booleanAt(record, 'NoCatchUp', ''),
    ...(error === undefined ? {} : { error }),
    ...(message === undefined ? {} : { message }),
  };
}

/**
 * Parses the text of a `fortio load -json` file of an HTTP or gRPC run. Throws an Error naming the
 * missing or mistyped field (`fortio result: DurationHistogram.Avg must be a number, missing`).
 */
export function parseFortioResult(text: string): FortioResult {
  if (text.trim() === '') throw new Error('fortio result: the file is empty');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`fortio result: not valid JSON (${(error as Error).message})`);
  }
  const record = objectAt(json, 'the result');
  const common = parseRunnerResults(record);
  const RetCodes = countsAt(record, 'RetCodes', '');
  if (common.RunType === 'HTTP') {
    const sizes = record.Sizes == null ? {} : { Sizes: parseHistogram(record.Sizes, 'Sizes') };
    const headerSizes =
      record.HeaderSizes == null ? {} : { HeaderSizes: parseHistogram(record.HeaderSizes, 'HeaderSizes') };
    return {
      ...common,
      RetCodes,
      URL: stringAt(record, 'URL', ''),
      DisableKeepAlive: booleanAt(record, 'DisableKeepAlive', ''),
      Resolution: numberAt(record, 'Resolution', ''),
      SocketCount: numberAt(record, 'SocketCount', ''),
      Sockets: sliceAt(record, 'Sockets', '').map((value, index) =>
        typeof value === 'number' ? value : fail(`Sockets[${index}]`, 'a number', value),
      ),
      ...sizes,
      ...headerSizes,
    };
  }
  if (common.RunType.startsWith('GRPC')) {
    return {
      ...common,
      RetCodes,
      Destination: stringAt(record, 'Destination', ''),
      Streams: numberAt(record, 'Streams', ''),
      Ping: booleanAt(record, 'Ping', ''),
    };
  }
  throw new Error(
    `fortio result: RunType ${JSON.stringify(common.RunType)} is not a run the network lab makes (HTTP or GRPC ...)`,
  );
}

// ---- readings --------------------------------------------------------------------------------

export function isGrpcResult(result: FortioResult): result is FortioGrpcResult {
  return result.RunType.startsWith('GRPC');
}

export function fortioProtocol(result: FortioResult): 'http' | 'grpc' {
  return isGrpcResult(result) ? 'grpc' : 'http';
}

/** The code of a successful call: HTTP 200, or the gRPC health status SERVING. */
export function okCode(result: FortioResult): string {
  return isGrpcResult(result) ? 'SERVING' : '200';
}

/** Calls that ended with another code than `okCode`, by code (counts; empty when none). */
export function nonOkCodes(result: FortioResult): Record<string, number> {
  const ok = okCode(result);
  return Object.fromEntries(
    Object.entries(result.RetCodes).filter(([code, count]) => code !== ok && count > 0),
  );
}

/** `-qps` as a number, or null at saturation (`"max"`). */
export function requestedQps(result: FortioResult): number | null {
  if (result.RequestedQPS === 'max') return null;
  const qps = Number(result.RequestedQPS);
  if (result.RequestedQPS.trim() === '' || !Number.isFinite(qps)) {
    throw new Error(
      `fortio result: RequestedQPS must be a number or "max", got ${JSON.stringify(result.RequestedQPS)}`,
    );
  }
  return qps;
}

/** The run's elapsed time in seconds (`ActualDuration` is nanoseconds). */
export function actualSeconds(result: FortioResult): number {
  return result.ActualDuration / 1e9;
}

/** Mean latency of the calls, ms. */
export function meanMs(result: FortioResult): number {
  return result.DurationHistogram.Avg * 1000;
}

/** Latency at `percentile` (50, 90, 99) in ms, or undefined when the run did not ask `-p` for it. */
export function percentileMs(result: FortioResult, percentile: number): number | undefined {
  const found = result.DurationHistogram.Percentiles.find((entry) => entry.Percentile === percentile);
  return found === undefined ? undefined : found.Value * 1000;
}
