// PostgreSQL twin of SQLite migration 24: admissions to the shared GCRA rows taken in
// batches. Every request on a keyed route takes one step (its request slot) or two (the
// slot, then its token estimate only if the slot was admitted); a replica under load
// sends the steps gathered while its previous statement ran as ONE call of this function,
// instead of one statement each. The function runs them in array order, each as the
// single-step UPSERT did (gcraStep in pipeline/gcra.ts, in SQL), so the admissions are
// exactly those the single statements would make; the caller sorts by key, so every
// replica locks rows in (key, kind) order, as the settlements do, and batches cannot deadlock.
import type { Migration } from '../sqlite/migrations.js';

/**
 * Arguments, one element per admission: the key; the first step's kind, fresh row (the
 * step from a full bucket: tat, admitted) and cost in ms; the second step's fresh row and
 * cost (null cost: no second step; its kind is always 'tokens'); the admission's now and
 * horizon (now + a minute + slack). Returns one row per admission, in order.
 */
/** One GCRA step (gcraStep) as an UPSERT of row `kind`, its result INTO the two outputs named. */
const gcraUpsert = (kind: string, freshTat: string, freshAdmitted: string, cost: string, into: string): string => {
  const next = `GREATEST(r.tat, p_now[i]) + ${cost}`;
  return `INSERT INTO rate_limits AS r (key_id, kind, tat, admitted) VALUES (p_key[i], ${kind}, ${freshTat}, ${freshAdmitted})
      ON CONFLICT (key_id, kind) DO UPDATE SET
        admitted = ${next} <= p_horizon[i],
        tat = CASE WHEN ${next} <= p_horizon[i] THEN ${next} ELSE r.tat END
      RETURNING r.tat, r.admitted INTO ${into};`;
};

const TAKE_LIMITS_FUNCTION = `
CREATE FUNCTION svc_take_limits(
  p_key TEXT[], p_kind TEXT[], p_fresh_tat FLOAT8[], p_fresh_admitted BOOLEAN[], p_cost FLOAT8[],
  p_token_fresh_tat FLOAT8[], p_token_fresh_admitted BOOLEAN[], p_token_cost FLOAT8[],
  p_now FLOAT8[], p_horizon FLOAT8[])
RETURNS TABLE (o_index INTEGER, o_tat FLOAT8, o_admitted BOOLEAN, o_token_tat FLOAT8, o_token_admitted BOOLEAN)
LANGUAGE plpgsql AS $fn$
BEGIN
  FOR i IN 1 .. COALESCE(array_length(p_key, 1), 0) LOOP
    o_index := i;
    ${gcraUpsert('p_kind[i]', 'p_fresh_tat[i]', 'p_fresh_admitted[i]', 'p_cost[i]', 'o_tat, o_admitted')}
    o_token_tat := NULL;
    o_token_admitted := NULL;
    IF o_admitted AND p_token_cost[i] IS NOT NULL THEN
      ${gcraUpsert(`'tokens'`, 'p_token_fresh_tat[i]', 'p_token_fresh_admitted[i]', 'p_token_cost[i]', 'o_token_tat, o_token_admitted')}
    END IF;
    RETURN NEXT;
  END LOOP;
END
$fn$;`;

export const BATCHED_LIMITS_MIGRATION: Migration = {
  version: 24,
  name: 'batched rate-limit admissions: svc_take_limits',
  sql: TAKE_LIMITS_FUNCTION,
};
