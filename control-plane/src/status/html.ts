// HTML built from strings with every interpolated value escaped unless it is already
// markup made here. Org names, instance labels and hostnames reach these pages, and an
// org or a node agent can choose them: escaping by default means a forgotten call to an
// escape function cannot open a hole.

/** Markup produced by `html` (or trusted constant text): interpolated as-is. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text for an HTML text node or a quoted attribute value. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

type Part = Html | string | number | boolean | null | undefined | ReadonlyArray<Part>;

function render(part: Part): string {
  if (part === null || part === undefined || part === false) return '';
  if (part instanceof Html) return part.text;
  if (Array.isArray(part)) return part.map(render).join('');
  return escapeHtml(String(part));
}

/** Tagged template: `html\`<td>${name}</td>\`` escapes `name`; nested `html` results and arrays of them are kept. */
export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1]!;
  return new Html(out);
}
