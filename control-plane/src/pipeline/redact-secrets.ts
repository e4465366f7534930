// Stored idempotent answers never hold a secret: a key value or webhook secret is shown
// once, in the live answer. A replay says the value was there and is withheld, so a
// client that lost the first answer knows to rotate rather than parse a missing field.

/**
 * `body` (a JSON object) with each named top-level field that holds a value replaced by
 * `null`, and `<field>_redacted: true` beside it. Anything else comes back unchanged.
 */
export function redactSecrets(body: string, fields: readonly string[]): string {
  if (fields.length === 0) return body;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return body;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return body;
  const object = parsed as Record<string, unknown>;
  let changed = false;
  for (const field of fields) {
    if (object[field] === undefined || object[field] === null) continue;
    object[field] = null;
    object[`${field}_redacted`] = true;
    changed = true;
  }
  return changed ? JSON.stringify(object) : body;
}
