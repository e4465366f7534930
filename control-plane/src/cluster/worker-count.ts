// How many control-plane processes one machine runs (SVC_WORKERS). Pure: the caller
// passes the core count and the store engine, so the rule is table-tested.

export interface WorkerCount {
  count: number;
  /** Set when the request was lowered; said once in the start-up log. */
  reason?: string;
}

/**
 * `auto` is one worker per core. SQLite always gets one: the database file takes one
 * writer process, and a second process would turn every write into lock contention
 * (SQLITE_BUSY) instead of throughput.
 */
export function resolveWorkerCount(setting: string, cores: number, usesPostgres: boolean): WorkerCount {
  const wanted = setting === 'auto' ? Math.max(1, cores) : Number(setting);
  if (!Number.isInteger(wanted) || wanted < 1) throw new Error(`SVC_WORKERS must be "auto" or a whole number of at least 1, got ${JSON.stringify(setting)}`);
  if (wanted > 1 && !usesPostgres) {
    return { count: 1, reason: `SVC_WORKERS=${setting} asks for ${wanted} processes, but the store is SQLite, which takes one writer process: running 1. Set SVC_DATABASE_URL (PostgreSQL) to run several.` };
  }
  return { count: wanted };
}
