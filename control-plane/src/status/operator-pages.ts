// The operators' status page as served by the operators' listener
// (nodes/operator-metrics-server.ts): the page, the fleet fragment its script polls (with
// an ETag, so an unchanged fleet costs a 304), the same view as JSON, and the page's
// stylesheet and script. Answers are plain data; the listener writes them.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Clock } from '@svc/shared';
import type { DesiredReplica } from '../replicas/desired.js';
import { readFleet, type FleetSource } from './fleet-read.js';
import { fleetView } from './fleet-view.js';
import { hostAllowed } from './host-check.js';
import { fleetFragment, operatorPage } from './operator-page.js';
import { snapshotCache } from './snapshot-cache.js';

export interface PageAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The pages load only their own script and stylesheet and fetch only from here: an injected tag could run nothing. */
export const OPERATOR_PAGE_HEADERS = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

const asset = (name: string): string => readFileSync(new URL(`./assets/${name}`, import.meta.url), 'utf8');
const ASSETS: Record<string, { type: string; body: string }> = {
  '/status/status.css': { type: 'text/css; charset=utf-8', body: asset('status.css') },
  '/status/operator.js': { type: 'text/javascript; charset=utf-8', body: asset('operator.js') },
};

const HTML = 'text/html; charset=utf-8';

export interface OperatorPages {
  /** The paths these pages answer. */
  paths: ReadonlySet<string>;
  /** Throws when the fleet cannot be read (the listener answers 503). */
  answer(path: string, headers: { host?: string | undefined; 'if-none-match'?: string | undefined }): Promise<PageAnswer>;
}

export function operatorPages(options: {
  fleet: FleetSource;
  desired: readonly DesiredReplica[];
  refreshMs: number;
  hostnames: readonly string[];
  clock: Clock;
}): OperatorPages {
  // Every open page polls; they share one store read and one rendering per half refresh
  // period, and a thousand nodes render to megabytes: hence the ETag.
  const fleet = snapshotCache(
    async () => {
      const view = fleetView(await readFleet(options.fleet, options.desired, options.clock.now()));
      const fragment = fleetFragment(view).text;
      return { view, fragment, etag: `"${createHash('sha256').update(fragment).digest('base64url').slice(0, 27)}"` };
    },
    Math.max(100, options.refreshMs / 2),
    options.clock,
  );
  const ok = (type: string, body: string, extra: Record<string, string> = {}): PageAnswer => ({
    status: 200,
    headers: { 'content-type': type, ...OPERATOR_PAGE_HEADERS, ...extra },
    body,
  });

  return {
    paths: new Set(['/', '/status', '/status/fleet.html', '/status/fleet.json', ...Object.keys(ASSETS)]),
    async answer(path, headers) {
      if (!hostAllowed(headers.host, options.hostnames)) {
        const message = `the status page is not served to host ${JSON.stringify(headers.host ?? '')}; open it by IP address or localhost, or add the name to SVC_OPERATOR_HOSTNAMES`;
        return { status: 400, headers: { 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify({ error: { type: 'invalid_request', message } }) };
      }
      const file = ASSETS[path];
      if (file) return ok(file.type, file.body);
      if (path === '/') return { status: 302, headers: { location: '/status' }, body: '' };
      const { view, fragment, etag } = await fleet.get();
      if (path === '/status') return ok(HTML, operatorPage(view, options.refreshMs).text);
      if (path === '/status/fleet.html') {
        const extra = { etag, 'x-generated-at': view.generatedAt };
        if (headers['if-none-match'] === etag) return { status: 304, headers: { ...OPERATOR_PAGE_HEADERS, ...extra }, body: '' };
        return ok(HTML, fragment, extra);
      }
      return ok('application/json; charset=utf-8', JSON.stringify(view));
    },
  };
}
