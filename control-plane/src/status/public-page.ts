// The public status pages as server-rendered HTML: every pool's status at /status, one
// pool's models and capacity at /status/{pool}. Built only from PublicStatus, which holds
// nothing internal (public-status.ts), and escaped anyway.
import { html, type Html } from './html.js';
import type { PublicPoolStatus, PublicStatus, ServiceStatus } from './public-status.js';

const WORDS: Record<ServiceStatus, string> = { up: 'Operational', degraded: 'Degraded', down: 'Down' };
const AVAILABILITY: Record<string, string> = { available: 'Available', limited: 'Limited', none: 'None free' };

function shell(title: string, body: Html, refreshSeconds: number): Html {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="${refreshSeconds}">
<title>${title}</title>
<link rel="stylesheet" href="/status/status.css">
</head><body class="public">${body}</body></html>`;
}

const badge = (s: ServiceStatus): Html => html`<span class="status status-${s}" data-status="${s}">${WORDS[s]}</span>`;

export function publicIndexPage(status: PublicStatus, refreshSeconds: number): Html {
  return shell(
    'Service status',
    html`<h1>Service status</h1>
<p class="overall">API: ${badge(status.status)}</p>
<p class="freshness">As of <time datetime="${status.generated_at}">${status.generated_at}</time></p>
${status.pools.length === 0
  ? html`<p class="empty">No regions are serving yet.</p>`
  : html`<table class="pools"><thead><tr><th>Region (pool)</th><th>Status</th></tr></thead><tbody>${status.pools.map(
      (p) => html`<tr data-pool="${p.pool}"><td><a href="/status/${encodeURIComponent(p.pool)}">${p.pool}</a></td><td>${badge(p.status)}</td></tr>`,
    )}</tbody></table>`}`,
    refreshSeconds,
  );
}

export function publicPoolPage(status: PublicStatus, pool: PublicPoolStatus | undefined, name: string, refreshSeconds: number): Html {
  const body = pool
    ? html`<p class="overall">Pool ${pool.pool}: ${badge(pool.status)}</p>
${pool.notes.map((n) => html`<p class="note">${n}</p>`)}
<h2>Models</h2>
${pool.models.length === 0
  ? html`<p class="empty">No models are served in this pool.</p>`
  : html`<table class="models"><thead><tr><th>Model</th><th>Status</th><th>Replicas ready</th></tr></thead><tbody>${pool.models.map(
      (m) => html`<tr data-model="${m.model}"><td>${m.model}</td><td>${badge(m.status)}</td><td>${m.replicas_ready} of ${m.replicas_desired}</td></tr>`,
    )}</tbody></table>`}
<h2>GPU capacity</h2>
${pool.capacity.length === 0
  ? html`<p class="empty">No GPUs in this pool.</p>`
  : html`<table class="capacity"><thead><tr><th>SKU</th><th>GPU</th><th>Free now</th></tr></thead><tbody>${pool.capacity.map(
      (c) => html`<tr data-sku="${c.sku}"><td>${c.sku}</td><td>${c.gpu_model}</td><td class="availability availability-${c.availability}">${AVAILABILITY[c.availability]}</td></tr>`,
    )}</tbody></table>`}`
    : html`<p class="overall">Pool ${name}: ${badge('down')}</p><p class="note">This pool has no capacity.</p>`;
  return shell(
    `Status: pool ${name}`,
    html`<h1>Service status: pool ${name}</h1>
<p class="overall">API: ${badge(status.status)}</p>
<p class="freshness">As of <time datetime="${status.generated_at}">${status.generated_at}</time> · <a href="/status">all pools</a></p>
${body}`,
    refreshSeconds,
  );
}
