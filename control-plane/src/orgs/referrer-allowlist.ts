// Origin patterns for public (browser) keys. An entry is a host, optionally with a
// scheme and a port, and optionally a leading `*.` for any subdomain:
// `app.example.com`, `https://example.com`, `https://*.example.com`, `http://localhost:3000`.

export interface OriginPattern {
  scheme: string | undefined;
  host: string;
  wildcard: boolean;
  port: string | undefined;
}

const PATTERN = /^(?:(https?):\/\/)?(\*\.)?([a-z0-9.-]+|\[[0-9a-f:.]+\])(?::(\d{1,5}))?\/?$/i;

export function parseOriginPattern(text: string): OriginPattern | undefined {
  const match = PATTERN.exec(text.trim());
  if (!match) return undefined;
  const [, scheme, star, host, port] = match;
  return { scheme: scheme?.toLowerCase(), host: host!.toLowerCase(), wildcard: star !== undefined, port };
}

export const isValidOriginPattern = (text: string): boolean => parseOriginPattern(text) !== undefined;

/** The origin a browser request came from: the Origin header, else the Referer's origin. */
export function requestOrigin(origin: string | undefined, referer: string | undefined): URL | undefined {
  for (const candidate of [origin, referer]) {
    if (!candidate || candidate === 'null') continue;
    try {
      return new URL(candidate);
    } catch {
      // A malformed header is as good as none.
    }
  }
  return undefined;
}

function defaultPort(scheme: string): string {
  return scheme === 'https:' ? '443' : '80';
}

export function originMatches(origin: URL, pattern: OriginPattern): boolean {
  const scheme = origin.protocol.replace(':', '');
  if (pattern.scheme && pattern.scheme !== scheme) return false;
  const host = origin.hostname.toLowerCase();
  const hostOk = pattern.wildcard ? host.endsWith(`.${pattern.host}`) : host === pattern.host;
  if (!hostOk) return false;
  if (pattern.port) return (origin.port || defaultPort(origin.protocol)) === pattern.port;
  return true;
}

export function isOriginAllowed(origin: URL, patterns: readonly OriginPattern[]): boolean {
  return patterns.some((p) => originMatches(origin, p));
}
