// The operators' status page script (hand-written, no build step): fetches the fleet
// fragment every few seconds and swaps it in when it changed, so the page follows the
// fleet without a reload. The fragment is rendered and escaped by the server; nothing
// here builds markup from data. If a fetch fails the page keeps the last view and says
// it is stale.
(() => {
  const body = document.body;
  const every = Number(body.dataset.refreshMs) || 2000;
  const url = body.dataset.fragmentUrl;
  const fleet = document.getElementById('fleet');
  const updated = document.getElementById('updated');
  const live = document.getElementById('live');
  // Details a person opened or closed stay that way across refreshes.
  const toggled = new Map();
  fleet.addEventListener('toggle', (e) => {
    const node = e.target.closest('[data-node-id]');
    if (node) toggled.set(node.dataset.nodeId, e.target.open);
  }, true);

  // The fragment's ETag: an unchanged fleet answers 304 and the page keeps what it shows.
  let etag = null;

  async function refresh() {
    try {
      const headers = { accept: 'text/html' };
      if (etag) headers['if-none-match'] = etag;
      const res = await fetch(url, { cache: 'no-store', headers });
      if (res.status !== 304) {
        if (!res.ok) throw new Error(`HTTP ${res.status}`);
        fleet.innerHTML = await res.text();
        etag = res.headers.get('etag');
        for (const [id, open] of toggled) {
          const details = fleet.querySelector(`[data-node-id="${CSS.escape(id)}"] details`);
          if (details) details.open = open;
        }
      }
      const at = res.headers.get('x-generated-at');
      if (at) {
        updated.textContent = at;
        updated.setAttribute('datetime', at);
      }
      live.textContent = 'live';
      live.classList.remove('stale');
    } catch (err) {
      live.textContent = `stale: could not refresh (${err.message}); retrying`;
      live.classList.add('stale');
    } finally {
      setTimeout(refresh, every);
    }
  }
  setTimeout(refresh, every);
})();
