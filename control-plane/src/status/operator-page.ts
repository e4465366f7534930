// The operators' status page as server-rendered HTML: the page shell, and the fleet
// fragment that the page's script (assets/operator.js) fetches again every few seconds
// and swaps in, so the page follows the fleet without reloading. One renderer for both,
// and every value escaped by `html` (org names, labels and hostnames are not ours).
import { html, type Html } from './html.js';
import type { FleetView, NodeCard, PoolView, TimelineEntry, WorkloadView } from './fleet-view.js';

const STATE_TEXT = { healthy: 'healthy', unhealthy: 'unhealthy', unknown: 'unknown (offline or not sampled)' } as const;

function eventTitle(e: TimelineEntry): string {
  if (e.kind === 'xid' && e.xid !== null) return `XID ${e.xid}`;
  return e.kind.replaceAll('_', ' ');
}

function timelineRows(entries: readonly TimelineEntry[], withNode: boolean): Html {
  if (entries.length === 0) return html`<p class="empty">No health events.</p>`;
  return html`<table class="timeline">
<thead><tr><th>When</th>${withNode ? html`<th>Node</th>` : ''}<th>GPU</th><th>Event</th><th>Meaning</th><th>Recommended action</th><th>Affected</th><th>Message</th></tr></thead>
<tbody>${entries.map(
    (e) => html`<tr class="event event-${e.kind}${e.healthy === false ? ' event-bad' : ''}" data-seq="${e.seq}">
<td><time datetime="${e.at}">${e.at.replace('T', ' ').replace(/\.\d+Z$/, 'Z')}</time></td>${withNode ? html`<td>${e.hostname}</td>` : ''}<td>${e.gpuIndex === null ? '-' : `GPU ${e.gpuIndex}`}</td><td class="event-name">${eventTitle(e)}</td><td class="meaning">${e.meaning ?? '-'}</td><td class="action">${e.action ?? '-'}</td><td class="affected">${e.affected.length === 0 ? '-' : e.affected.join(', ')}</td><td class="message">${e.message}</td></tr>`,
  )}</tbody></table>`;
}

function workloadRows(workloads: readonly WorkloadView[]): Html {
  if (workloads.length === 0) return html`<p class="empty">No instances or replicas.</p>`;
  return html`<table class="workloads">
<thead><tr><th>Kind</th><th>Id</th><th>Org</th><th>Status</th><th>GPUs</th><th>Labels / model</th></tr></thead>
<tbody>${workloads.map(
    (w) => html`<tr class="workload workload-${w.kind}" data-id="${w.id}"><td>${w.kind}</td><td class="workload-id">${w.id}</td><td class="org">${w.org ?? '(provider)'}</td><td>${w.status}</td><td>${w.gpuIndexes.join(', ') || '-'}</td><td class="detail">${w.detail || '-'}</td></tr>`,
  )}</tbody></table>`;
}

function nodeCard(node: NodeCard): Html {
  return html`<article class="node" data-node-id="${node.id}">
<h3><span class="hostname">${node.hostname}</span> <small class="node-id">${node.id}</small> <span class="node-status node-status-${node.status.split(' ')[0]}">${node.status}</span></h3>
<div class="gpus" aria-label="GPUs">${node.gpus.map(
    (g) => html`<div class="gpu gpu-${g.state}" data-gpu-index="${g.index}" data-state="${g.state}" title="${`GPU ${g.index} · ${g.name} · ${g.uuid} · ${STATE_TEXT[g.state]}${g.reason ? ` (${g.reason})` : ''}${g.heldBy ? ` · held by ${g.heldBy}` : ''}`}"><span class="gpu-index">${g.index}</span>${g.heldBy ? html`<span class="gpu-held" aria-label="in use">●</span>` : ''}</div>`,
  )}</div>
${workloadRows(node.workloads)}
<details class="node-timeline"${node.timeline.some((e) => e.healthy === false) ? ' open' : ''}><summary>Health timeline of ${node.hostname}</summary>${timelineRows(node.timeline, false)}</details>
</article>`;
}

function poolSection(pool: PoolView): Html {
  const t = pool.totals;
  return html`<section class="pool" data-pool="${pool.pool}">
<h2>Pool ${pool.pool}</h2>
<dl class="totals">
<div><dt>Nodes ready</dt><dd class="nodes-ready">${t.nodesReady} / ${t.nodes}</dd></div>
<div><dt>GPUs free</dt><dd class="gpus-free">${t.gpusFree}</dd></div>
<div><dt>GPUs in use</dt><dd class="gpus-used">${t.gpusUsed}</dd></div>
<div><dt>GPUs unhealthy</dt><dd class="gpus-unhealthy">${t.gpusUnhealthy}</dd></div>
<div><dt>GPUs unknown</dt><dd class="gpus-unknown">${t.gpusUnknown}</dd></div>
<div><dt>Replicas running / desired</dt><dd class="replicas">${t.replicasRunning} / ${t.replicasDesired}</dd></div>
</dl>
${pool.nodes.map(nodeCard)}
</section>`;
}

/**
 * The part of the page that follows the fleet: swapped in whole by the page's script. It
 * holds no time of its own (the listener sends that in a header), so an unchanged fleet
 * renders the same text and the page can ask "anything new?" with an ETag.
 */
export function fleetFragment(view: FleetView): Html {
  return html`<div class="fleet">
${view.pools.length === 0 ? html`<p class="empty">No nodes have enrolled yet.</p>` : view.pools.map(poolSection)}
<section id="fleet-timeline"><h2>Health timeline (latest ${view.timeline.length})</h2>${timelineRows(view.timeline, true)}</section>
</div>`;
}

export function operatorPage(view: FleetView, refreshMs: number): Html {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Fleet status</title>
<link rel="stylesheet" href="/status/status.css">
<script src="/status/operator.js" defer></script>
</head>
<body class="operator" data-refresh-ms="${refreshMs}" data-fragment-url="/status/fleet.html">
<header><h1>Fleet status</h1>
<p class="legend"><span class="gpu gpu-healthy"></span> healthy <span class="gpu gpu-unhealthy"></span> unhealthy (XID, ECC, thermal) <span class="gpu gpu-unknown"></span> unknown / offline</p>
<p class="freshness">Updated <time id="updated" datetime="${view.generatedAt}">${view.generatedAt}</time> <span id="live">live</span></p></header>
<main id="fleet">${fleetFragment(view)}</main>
</body></html>`;
}
