/**
 * Row shapes both labs' reports share (lib/report/table-rows.ts for the LLM-gateway lab,
 * lib/report/network/table-rows.ts for the network lab): each extends these with its own keys.
 */

/** A run left out of the tables, with the checks it failed: each lab's "Invalid runs" table. */
export interface InvalidRunRow {
  readonly runId: string;
  readonly title: string;
  readonly reasons: readonly string[];
}

/** A row that averages the valid repeats of one arm. */
export interface RepeatedRow {
  /** Valid runs averaged into this row. */
  readonly repeats: number;
}
