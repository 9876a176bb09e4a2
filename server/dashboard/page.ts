// The /ops/ dashboard: one page following GET /api/ops/v1/events (EventSource on an open server;
// a fetch stream with the bearer token when security is on). Everything is
// written with textContent (no markup from data), no inline script (a strict CSP would allow the
// page), and it holds nothing but what the snapshot carries: no payload bytes; tenant ids only in
// the usage table (the tenants the policy names), which needs observability.read like the rest.
// URLs are relative, so the page also works behind a path prefix.

export const DASHBOARD_HTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>svc operations</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="assets/uPlot.min.css">
<link rel="stylesheet" href="assets/dashboard.css">
</head>
<body>
<header>
  <h1>svc operations</h1>
  <span id="status" class="badge" data-status="">connecting…</span>
  <span id="connection" class="muted" data-state="connecting">connecting</span>
</header>
<form id="token-form" hidden>
  <p id="token-message"></p>
  <label>Bearer token <input id="token-input" type="password" autocomplete="off" size="60"></label>
  <button type="submit">Use</button>
</form>
<p id="summary" class="summary">Waiting for the first snapshot…</p>
<p class="muted small">node <span id="node-id">–</span> · sequence <span id="sequence">–</span> · observed <span id="observed-at">–</span></p>
<main>
  <section class="card wide">
    <h2>Throughput</h2>
    <div id="throughput" data-points="0" data-ingest-bytes="0" data-served-bytes="0"></div>
    <p class="muted small">Upload bytes as they arrive and bytes served, per second, between two snapshots; the last ten minutes come from the server when the page opens.</p>
  </section>
  <section class="card">
    <h2>Checks</h2>
    <table id="checks"><thead><tr><th>check</th><th>status</th><th>detail</th></tr></thead><tbody></tbody></table>
  </section>
  <section class="card">
    <h2>Dependencies</h2>
    <table id="dependencies"><thead><tr><th>kind</th><th>status</th><th>latency</th></tr></thead><tbody></tbody></table>
  </section>
  <section class="card wide" id="nodes-card">
    <h2>Nodes</h2>
    <p class="muted small" id="nodes-none">this node only (embedded backend)</p>
    <div class="scroll"><table id="nodes"><thead><tr><th>node</th><th>address</th><th>state</th><th>health</th><th>requests</th><th>errors</th><th>in</th><th>out</th><th>transfers</th><th>last seen</th></tr></thead><tbody></tbody></table></div>
    <p class="muted small" id="cluster-totals"></p>
  </section>
  <section class="card" id="tenants-card">
    <h2>Tenants</h2>
    <div class="scroll"><table id="tenants"><thead><tr><th>tenant</th><th>retained</th><th>objects</th><th>quota</th></tr></thead><tbody></tbody></table></div>
    <p class="muted small">the tenants the tenant policy names; with security off, the default tenant</p>
  </section>
  <section class="card">
    <h2>Deduplication</h2>
    <p class="big"><span id="reuse">–</span></p>
    <p class="muted small">of block bytes were already stored</p>
    <dl>
      <dt>fresh blocks</dt><dd id="fresh-blocks">–</dd>
      <dt>duplicate blocks</dt><dd id="duplicate-blocks">–</dd>
      <dt>ingested</dt><dd id="bytes-ingested">–</dd>
      <dt>served</dt><dd id="bytes-served">–</dd>
      <dt>requests</dt><dd id="requests">–</dd>
      <dt>errors</dt><dd id="errors">–</dd>
    </dl>
  </section>
  <section class="card">
    <h2>Storage</h2>
    <div class="meter"><div id="disk-meter"></div></div>
    <dl>
      <dt>backend</dt><dd id="backend">–</dd>
      <dt>stored by svc</dt><dd id="used-bytes">–</dd>
      <dt>free on its disk</dt><dd id="available-bytes">–</dd>
      <dt>blobs</dt><dd id="blobs">–</dd>
      <dt>blocks</dt><dd id="blocks">–</dd>
      <dt>quarantined</dt><dd id="quarantined">–</dd>
    </dl>
  </section>
  <section class="card">
    <h2>Capacity</h2>
    <dl>
      <dt>worker threads</dt><dd id="threads">–</dd>
      <dt>tasks running</dt><dd id="running">–</dd>
      <dt>tasks queued</dt><dd id="queued">–</dd>
      <dt>transfers in flight</dt><dd id="transfers">–</dd>
      <dt>upload buffers</dt><dd id="buffered">–</dd>
    </dl>
    <div class="meter"><div id="buffer-meter"></div></div>
  </section>
  <section class="card">
    <h2>Durability and GC</h2>
    <dl>
      <dt>mode</dt><dd id="durability-mode">–</dd>
      <dt>corrupt blocks</dt><dd id="corrupt">–</dd>
    </dl>
    <h3>last garbage collection</h3>
    <dl id="gc"><dt>runs</dt><dd>none yet</dd></dl>
  </section>
</main>
<script src="assets/uPlot.iife.min.js"></script>
<script src="assets/dashboard.js"></script>
</body>
</html>
`;

export const DASHBOARD_CSS = `:root { color-scheme: light dark; --ok: #1a7f37; --warn: #9a6700; --bad: #cf222e; --line: #8884; }
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 auto; padding: 1rem 1.5rem; max-width: 1200px; }
header { display: flex; align-items: center; gap: 1rem; }
h1 { font-size: 1.3rem; margin: 0; }
h2 { font-size: 1rem; margin: 0 0 .5rem; }
h3 { font-size: .9rem; margin: .75rem 0 .25rem; }
.badge { padding: .15rem .6rem; border-radius: 1rem; font-weight: 600; border: 1px solid var(--line); }
.badge[data-status="Ready"] { background: var(--ok); color: #fff; }
.badge[data-status="Degraded"] { background: var(--warn); color: #fff; }
.badge[data-status="Unavailable"] { background: var(--bad); color: #fff; }
.muted { opacity: .7; }
.small { font-size: .85rem; }
.summary { font-size: 1rem; }
main { display: grid; grid-template-columns: repeat(auto-fill, minmax(320px, 1fr)); gap: 1rem; }
.card { border: 1px solid var(--line); border-radius: .5rem; padding: .75rem 1rem; min-width: 0; }
.wide { grid-column: 1 / -1; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .2rem .4rem; border-bottom: 1px solid var(--line); vertical-align: top; }
td.ok { color: var(--ok); } td.warn { color: var(--warn); } td.failed { color: var(--bad); font-weight: 600; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: .5rem 0; }
dt { opacity: .7; } dd { margin: 0; font-variant-numeric: tabular-nums; }
.big { font-size: 2rem; font-weight: 600; margin: 0; }
.meter { height: .6rem; border-radius: .3rem; background: var(--line); overflow: hidden; }
.meter > div { height: 100%; width: 0; background: #0969da; transition: width .3s; }
`;

export const DASHBOARD_JS = `'use strict';
(function () {
  var MAX_POINTS = 600;
  var UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  function bytes(n) {
    if (typeof n !== 'number' || !isFinite(n)) return '–';
    var i = 0;
    while (n >= 1024 && i < UNITS.length - 1) { n /= 1024; i++; }
    return (i === 0 ? String(n) : n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0)) + ' ' + UNITS[i];
  }
  function rate(n) { return bytes(n) + '/s'; }
  function $(id) { return document.getElementById(id); }
  function text(id, value) { var el = $(id); if (el) el.textContent = value === undefined || value === null ? '–' : String(value); }
  function rows(tableId, items, cells) {
    var body = $(tableId).tBodies[0];
    body.replaceChildren();
    items.forEach(function (item) {
      var tr = document.createElement('tr');
      cells(item).forEach(function (c) {
        var td = document.createElement('td');
        td.textContent = c.text;
        if (c.cls) td.className = c.cls;
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
  }

  // Throughput: x in seconds, ingest and read rates in bytes per second.
  var data = [[], [], []];
  var ingestTotal = 0, servedTotal = 0;
  var chartEl = $('throughput');
  var chart = null;
  function width() { return Math.max(300, chartEl.clientWidth || 600); }
  var AXIS_FONT = '12px sans-serif';
  // Whole seconds and up: a label per tick, none repeated.
  var TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
  function two(n) { return n < 10 ? '0' + n : String(n); }
  function clock(v) { var d = new Date(v * 1000); return two(d.getHours()) + ':' + two(d.getMinutes()) + ':' + two(d.getSeconds()); }
  if (typeof uPlot === 'function') {
    chart = new uPlot({
      width: width(),
      height: 240,
      scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, Math.max(1024, max * 1.1)]; } } },
      // Time labels on one line, at least 110 px apart (uPlot's defaults put dates on a second line and crowd them).
      axes: [{ space: 110, incrs: TIME_STEPS, font: AXIS_FONT, values: function (u, vals) { return vals.map(clock); } }, { size: 80, font: AXIS_FONT, values: function (u, vals) { return vals.map(rate); } }],
      hooks: { draw: [labelBoxes] },
      series: [
        {},
        { label: 'ingest', stroke: '#0969da', width: 2, value: function (u, v) { return v === null ? '–' : rate(v); } },
        { label: 'read', stroke: '#1a7f37', width: 2, value: function (u, v) { return v === null ? '–' : rate(v); } },
      ],
    }, data, chartEl);
    window.addEventListener('resize', function () { chart.setSize({ width: width(), height: 240 }); });
  }

  // Where the time axis's labels are drawn (canvas text: no DOM boxes), as [left, right] pixels in data-x-labels.
  function labelBoxes(u) {
    var axis = u.axes[0];
    var splits = axis._splits || [], values = axis._values || [];
    var ctx = document.createElement('canvas').getContext('2d');
    ctx.font = AXIS_FONT;
    var boxes = [];
    for (var i = 0; i < splits.length; i++) {
      if (values[i] == null || values[i] === '') continue;
      var x = u.valToPos(splits[i], 'x');
      var w = ctx.measureText(String(values[i])).width;
      boxes.push([Math.round((x - w / 2) * 10) / 10, Math.round((x + w / 2) * 10) / 10]);
    }
    chartEl.setAttribute('data-x-labels', JSON.stringify(boxes));
  }

  var previous = null;
  function addPoint(s) {
    if (previous) {
      var dt = (Date.parse(s.observedAt) - Date.parse(previous.observedAt)) / 1000;
      var di = s.traffic.bytesIngested - previous.traffic.bytesIngested;
      var ds = s.traffic.bytesServed - previous.traffic.bytesServed;
      // A restarted server starts its counters at zero again: no negative rates.
      if (dt > 0 && di >= 0 && ds >= 0) {
        data[0].push(Date.parse(s.observedAt) / 1000);
        data[1].push(di / dt);
        data[2].push(ds / dt);
        ingestTotal += di;
        servedTotal += ds;
        if (data[0].length > MAX_POINTS) data.forEach(function (a) { a.shift(); });
        if (chart) chart.setData(data);
      }
    }
    previous = s;
    chartEl.setAttribute('data-points', String(data[0].length));
    chartEl.setAttribute('data-ingest-bytes', String(ingestTotal));
    chartEl.setAttribute('data-served-bytes', String(servedTotal));
  }

  function show(s) {
    var badge = $('status');
    badge.textContent = s.status;
    badge.setAttribute('data-status', s.status);
    document.title = 'svc: ' + s.status;
    text('summary', s.summary);
    text('node-id', s.placement.nodeId + ' (' + s.placement.mode + ')');
    text('sequence', s.sequence);
    text('observed-at', new Date(s.observedAt).toLocaleTimeString());
    rows('checks', s.checks, function (c) { return [{ text: c.id }, { text: c.status, cls: c.status }, { text: c.detail }]; });
    rows('dependencies', s.dependencies, function (d) { return [{ text: d.kind }, { text: d.status, cls: d.status }, { text: d.latencyMs + ' ms' }]; });
    // The cluster (shared catalogs): every known node as its last heartbeat described it, and the live ones' totals.
    var cluster = s.cluster;
    var nodes = cluster ? cluster.nodes : [];
    $('nodes-none').hidden = nodes.length > 0;
    rows('nodes', nodes, function (n) {
      var health = typeof n.health === 'string' ? n.health : 'failed: ' + n.health.failed.join(', ');
      var t = n.traffic, c = n.capacity;
      return [
        { text: n.self ? n.nodeId + ' (this one)' : n.nodeId }, { text: n.address || '–' }, { text: n.state, cls: n.state === 'live' ? 'ok' : 'warn' },
        { text: health, cls: health === 'ok' ? 'ok' : health === 'unknown' ? '' : 'failed' },
        { text: t ? t.requests : '–' }, { text: t ? t.errors : '–' }, { text: t ? bytes(t.bytesIngested) : '–' }, { text: t ? bytes(t.bytesServed) : '–' },
        { text: c ? c.transfersInFlight : '–' }, { text: new Date(n.lastSeenAt).toLocaleTimeString() },
      ];
    });
    text('cluster-totals', cluster ? cluster.totals.liveNodes + ' of ' + cluster.totals.nodes + ' nodes live: ' + cluster.totals.requests + ' requests, ' + cluster.totals.errors + ' errors, ' +
      bytes(cluster.totals.bytesIngested) + ' in, ' + bytes(cluster.totals.bytesServed) + ' out, ' + cluster.totals.transfersInFlight + ' transfers in flight' : '');
    rows('tenants', s.tenants || [], function (r) {
      return [{ text: r.tenant }, { text: bytes(r.retainedBytes) }, { text: r.objects }, { text: r.quotaBytes === null ? 'none' : bytes(r.quotaBytes) + ' (' + Math.round((r.retainedBytes / Math.max(1, r.quotaBytes)) * 100) + ' %)' }];
    });
    var t = s.traffic;
    text('reuse', t.byteReusePercent.toFixed(1) + ' %');
    text('fresh-blocks', t.freshBlocks);
    text('duplicate-blocks', t.duplicateBlocks);
    text('bytes-ingested', bytes(t.bytesIngested));
    text('bytes-served', bytes(t.bytesServed));
    text('requests', t.requests);
    text('errors', t.errors);
    var st = s.storage;
    text('backend', st.backend);
    text('used-bytes', bytes(st.usedBytes));
    text('available-bytes', bytes(st.availableBytes));
    text('blobs', st.blobs);
    text('blocks', st.blocks);
    text('quarantined', st.quarantinedBlocks);
    var total = st.usedBytes + st.availableBytes;
    $('disk-meter').style.width = (total > 0 ? (100 * st.usedBytes) / total : 0).toFixed(1) + '%';
    var c = s.capacity;
    text('threads', c.workerPool.threads);
    text('running', c.workerPool.running);
    text('queued', c.workerPool.queued);
    text('transfers', c.transfersInFlight);
    text('buffered', bytes(c.bufferedBytes) + ' of ' + bytes(c.limitBytes));
    $('buffer-meter').style.width = (c.limitBytes > 0 ? (100 * c.bufferedBytes) / c.limitBytes : 0).toFixed(1) + '%';
    text('durability-mode', s.durability.mode);
    text('corrupt', s.durability.corruptBlocksDetected);
    showGc(s.durability.lastGc);
    addPoint(s);
  }

  // The last GC run as label/value pairs: counts with their bytes, times as local times.
  function gcValue(v) {
    if (v === null || v === undefined) return '–';
    if (typeof v === 'boolean') return v ? 'yes' : 'no';
    if (typeof v === 'string' && /^\\d{4}-\\d\\d-\\d\\dT/.test(v)) return new Date(v).toLocaleString();
    if (typeof v === 'object' && typeof v.count === 'number') return v.count + (typeof v.bytes === 'number' ? ' (' + bytes(v.bytes) + ')' : '');
    if (typeof v === 'object') return Object.keys(v).map(function (k) { return k + ': ' + gcValue(v[k]); }).join(', ') || '–';
    return String(v);
  }
  function showGc(run) {
    var list = $('gc');
    list.replaceChildren();
    var pairs = run === undefined ? [['runs', 'none yet']] : Object.keys(run).map(function (k) {
      return [k.replace(/([A-Z])/g, ' $1').toLowerCase(), gcValue(run[k])];
    });
    pairs.forEach(function (p) {
      var dt = document.createElement('dt');
      dt.textContent = p[0];
      var dd = document.createElement('dd');
      dd.textContent = p[1];
      list.appendChild(dt);
      list.appendChild(dd);
    });
  }

  // The server's recent history (GET api/ops/v1/history): seeds the chart before the first event.
  function seed(history) {
    if (!history || !history.points) return;
    var seconds = history.intervalMs / 1000;
    // Live points may have come first: the history goes before them.
    var firstLive = data[0].length > 0 ? data[0][0] * 1000 : Infinity;
    var older = history.points.filter(function (p) { return p.at < firstLive; });
    data[0] = older.map(function (p) { return p.at / 1000; }).concat(data[0]);
    data[1] = older.map(function (p) { return p.ingestedBytes / seconds; }).concat(data[1]);
    data[2] = older.map(function (p) { return p.servedBytes / seconds; }).concat(data[2]);
    older.forEach(function (p) {
      ingestTotal += p.ingestedBytes;
      servedTotal += p.servedBytes;
    });
    while (data[0].length > MAX_POINTS) data.forEach(function (a) { a.shift(); });
    if (chart) chart.setData(data);
    chartEl.setAttribute('data-points', String(data[0].length));
    chartEl.setAttribute('data-ingest-bytes', String(ingestTotal));
    chartEl.setAttribute('data-served-bytes', String(servedTotal));
  }

  function connection(state) {
    var el = $('connection');
    el.textContent = state;
    el.setAttribute('data-state', state);
  }

  // With security on the page needs a bearer token with observability.read: given once in the
  // address as #token=<JWT> (a fragment is never sent to a server), or typed into the form the
  // page shows when the server answers 401. It stays in this tab's sessionStorage.
  var match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem('svc-token', decodeURIComponent(match[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }
  // A token given later in the address (the page is open already): start again with it.
  window.addEventListener('hashchange', function () {
    if (/(?:^#|&)token=/.test(location.hash)) location.reload();
  });
  var token = sessionStorage.getItem('svc-token');
  var auth = token ? { Authorization: 'Bearer ' + token } : {};

  function askForToken(message) {
    connection('token needed');
    var form = $('token-form');
    form.hidden = false;
    $('token-message').textContent = message;
    form.addEventListener('submit', function (e) {
      e.preventDefault();
      sessionStorage.setItem('svc-token', $('token-input').value.trim());
      location.reload();
    });
  }

  function onSnapshotText(text) {
    var s;
    try { s = JSON.parse(text); } catch (err) { return; }
    show(s);
  }

  // The event stream read with fetch (EventSource cannot send a header), reconnecting after a pause.
  function follow() {
    fetch('../api/ops/v1/events', { headers: auth }).then(function (r) {
      if (r.status === 401 || r.status === 403) return askForToken(r.status === 401 ? 'The token was refused.' : 'The token does not grant observability.read.');
      if (!r.ok || !r.body) throw new Error('HTTP ' + r.status);
      connection('live');
      var reader = r.body.getReader();
      var decoder = new TextDecoder();
      var buffered = '';
      function pump() {
        return reader.read().then(function (chunk) {
          if (chunk.done) throw new Error('the stream ended');
          buffered += decoder.decode(chunk.value, { stream: true });
          var end;
          while ((end = buffered.indexOf('\\n\\n')) >= 0) {
            var frame = buffered.slice(0, end);
            buffered = buffered.slice(end + 2);
            var isSnapshot = /^event: snapshot$/m.test(frame);
            var data = frame.split('\\n').filter(function (l) { return l.indexOf('data: ') === 0; }).map(function (l) { return l.slice(6); }).join('\\n');
            if (isSnapshot && data) onSnapshotText(data);
          }
          return pump();
        });
      }
      return pump();
    }).catch(function () {
      connection('reconnecting');
      setTimeout(follow, 2000);
    });
  }

  fetch('../api/ops/v1/history', { headers: auth }).then(function (r) {
    if (r.status === 401 && !token) return askForToken('This server needs a bearer token with observability.read.');
    if (token || r.status === 401 || r.status === 403) return r.ok ? r.json().then(seed).then(follow) : follow();
    // An open server: EventSource, as browsers follow streams best.
    if (r.ok) r.json().then(seed, function () {});
    var source = new EventSource('../api/ops/v1/events');
    source.addEventListener('open', function () { connection('live'); });
    source.addEventListener('error', function () { connection(source.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting'); });
    source.addEventListener('snapshot', function (e) { onSnapshotText(e.data); });
  }, function () { connection('reconnecting'); setTimeout(function () { location.reload(); }, 2000); });
})();
`;
