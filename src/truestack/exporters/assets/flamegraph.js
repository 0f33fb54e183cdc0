// truestack flame graph viewer: an icicle graph (root on top) drawn on one canvas.
// Only the rows in view are drawn, and siblings narrower than a pixel are drawn
// as one grey "aggregate" box, so the cost of a frame is bounded by the screen
// size, not by the size of the tree.
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('ts-data').textContent);
  var ROW = 18, MIN_PX = 1;
  var $ = function (id) { return document.getElementById(id); };
  var view = $('ts-view'), canvas = $('ts-canvas'), spacer = $('ts-spacer'), tip = $('ts-tip');
  var ctx = canvas.getContext('2d');

  // ---- the call tree (node 0 is the root; parents come before children) ----
  var S = D.strings, N = D.parents.length + 1, NF = D.frames.length / 3;
  var parent = new Int32Array(N), nframe = new Int32Array(N), depth = new Int32Array(N);
  parent[0] = -1; nframe[0] = -1;
  var maxDepth = 0, i;
  for (i = 1; i < N; i++) {
    parent[i] = i - D.parents[i - 1];
    nframe[i] = D.nframe[i - 1];
    depth[i] = depth[parent[i]] + 1;
    if (depth[i] > maxDepth) maxDepth = depth[i];
  }
  // children as one flat array: kids[kidStart[n] .. kidStart[n+1])
  var kidStart = new Int32Array(N + 1), kids = new Int32Array(Math.max(N - 1, 0));
  for (i = 1; i < N; i++) kidStart[parent[i] + 1]++;
  for (i = 0; i < N; i++) kidStart[i + 1] += kidStart[i];
  var fill = kidStart.slice(0, N);
  for (i = 1; i < N; i++) kids[fill[parent[i]]++] = i;

  function fFunc(f) { return D.frames[3 * f]; }
  function fLine(f) { return D.frames[3 * f + 1]; }
  function fKind(f) { return D.kinds[D.frames[3 * f + 2]] || 'python'; }
  function funcName(f) { return S[D.funcs[3 * fFunc(f)]]; }
  function funcFile(f) { return S[D.funcs[3 * fFunc(f) + 1]]; }
  function baseName(path) { var k = Math.max(path.lastIndexOf('/'), path.lastIndexOf('\\')); return path.slice(k + 1); }
  function nodeName(n) { return n === 0 ? 'all' : funcName(nframe[n]); }
  function nodeWhere(n) {
    if (n === 0) return '';
    var f = nframe[n], line = fLine(f);
    return funcFile(f) + (line > 0 ? ':' + line : '');
  }
  // Short label drawn in the box: the file's base name keeps same-named functions apart.
  var shortLabel = new Array(NF);
  for (i = 0; i < NF; i++) {
    var ln = fLine(i);
    shortLabel[i] = funcName(i) + ' (' + baseName(funcFile(i)) + (ln > 0 ? ':' + ln : '') + ')';
  }

  // ---- the current view: which threads, which metric ----
  var cumC = new Float64Array(N), cumW = new Float64Array(N), selfC = new Float64Array(N), selfW = new Float64Array(N);
  var val = cumW, order = new Int32Array(kids.length);
  var state = { thread: 'all', metric: 'weight', zoom: 0, query: '', matched: null, matchPct: null, boxes: [], drawMs: 0 };

  function computeTotals() {
    selfC.fill(0); selfW.fill(0);
    D.threads.forEach(function (t) {
      if (state.thread !== 'all' && String(t.tid) !== state.thread) return;
      var node = 0;
      for (var k = 0; k < t.nodes.length; k++) {
        node += t.nodes[k];
        selfC[node] += t.counts[k];
        selfW[node] += t.weights[k];
      }
    });
    cumC.set(selfC); cumW.set(selfW);
    for (var n = N - 1; n > 0; n--) { cumC[parent[n]] += cumC[n]; cumW[parent[n]] += cumW[n]; }
    if (state.metric === 'weight' && cumW[0] <= 0) state.metric = 'count';  // no weights recorded
    $('ts-metric').value = state.metric;
    val = state.metric === 'weight' ? cumW : cumC;
    // widest child first, so the sub-pixel ones end up together at the right
    order.set(kids);
    for (var p = 0; p < N; p++) {
      var a = kidStart[p], b = kidStart[p + 1];
      if (b - a > 1) {
        var seg = Array.prototype.slice.call(order, a, b);
        seg.sort(function (x, y) { return val[y] - val[x] || x - y; });
        for (var q = 0; q < seg.length; q++) order[a + q] = seg[q];
      }
    }
  }

  // ---- colours ----
  function hash(s) { var h = 2166136261; for (var k = 0; k < s.length; k++) { h ^= s.charCodeAt(k); h = Math.imul(h, 16777619); } return h >>> 0; }
  var colorOfFunc = {};
  function color(n) {
    if (n === 0) return '#c9ced8';
    var f = nframe[n], kind = fKind(f), key = fFunc(f) + kind;
    var c = colorOfFunc[key];
    if (c) return c;
    var h = hash(funcName(f) + funcFile(f));
    if (kind === 'native') c = 'hsl(' + (190 + h % 30) + ',55%,' + (62 + (h >> 8) % 12) + '%)';
    else if (kind === 'python') c = 'hsl(' + (h % 50 + 5) + ',' + (70 + (h >> 8) % 20) + '%,' + (60 + (h >> 16) % 12) + '%)';
    else c = 'hsl(220,8%,' + (72 + h % 10) + '%)';
    return (colorOfFunc[key] = c);
  }

  // ---- drawing ----
  var font = '12px ui-monospace, Menlo, Consolas, "DejaVu Sans Mono", monospace', charW = 7.2, dpr = 1, width = 0, height = 0;
  function resize() {
    dpr = window.devicePixelRatio || 1;
    width = view.clientWidth; height = view.clientHeight;
    canvas.style.width = width + 'px'; canvas.style.height = height + 'px';
    canvas.width = Math.round(width * dpr); canvas.height = Math.round(height * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.font = font; charW = ctx.measureText('mmmmmmmmmm').width / 10;
    // the spacer gives the scroll height; the canvas is pinned over the visible part
    spacer.style.height = Math.max((maxDepth + 2) * ROW, height) + 'px';
    canvas.style.top = view.scrollTop + 'px';
  }

  function fitText(text, w) {
    var max = Math.floor((w - 6) / charW);
    if (max < 4) return text.length <= max ? text : '';
    return text.length <= max ? text : text.slice(0, max - 1) + '\u2026';
  }

  function box(x, y, w, fillStyle, text, boxes, rec) {
    ctx.fillStyle = fillStyle;
    ctx.fillRect(x, y, Math.max(w - 1, 0.5), ROW - 1);
    if (w > 2 * charW + 6 && text) {
      ctx.fillStyle = '#1d2330';
      ctx.fillText(fitText(text, w), x + 3, y + ROW / 2);
    }
    boxes.push(rec);
  }

  function draw() {
    var t0 = performance.now();
    ctx.clearRect(0, 0, width, height);
    ctx.font = font; ctx.textBaseline = 'middle';
    var top = view.scrollTop, firstRow = Math.floor(top / ROW), lastRow = Math.ceil((top + height) / ROW);
    var boxes = [], z = state.zoom, zv = val[z], m = state.matched;
    // the zoomed node's ancestors stay visible above it, full width and faded
    var chain = [];
    for (var a = parent[z]; a >= 0; a = parent[a]) chain.push(a);
    ctx.globalAlpha = 0.55;
    for (var c = chain.length - 1; c >= 0; c--) {
      var an = chain[c], row = depth[an];
      if (row >= firstRow && row <= lastRow) box(0, row * ROW - top, width, m && m[an] ? '#e040a0' : color(an), label(an), boxes, { n: an, x: 0, w: width, row: row });
    }
    ctx.globalAlpha = 1;
    if (zv > 0) {
      var scale = width / zv, stackN = [z], stackX = [0];
      while (stackN.length) {
        var n = stackN.pop(), x = stackX.pop(), w = val[n] * scale, r = depth[n], y = r * ROW - top;
        if (r >= firstRow) box(x, y, w, m && m[n] ? '#e040a0' : color(n), label(n), boxes, { n: n, x: x, w: w, row: r });
        if (r + 1 > lastRow) continue;
        var cx = x, aggV = 0, aggN = 0;
        for (var k = kidStart[n]; k < kidStart[n + 1]; k++) {
          var kid = order[k], kv = val[kid];
          if (kv <= 0) break;
          var kw = kv * scale;
          if (kw < MIN_PX) { aggV += kv; aggN++; continue; }
          stackN.push(kid); stackX.push(cx);
          cx += kw;
        }
        if (aggN && r + 1 >= firstRow && aggV * scale >= 0.5) {
          box(cx, y + ROW, aggV * scale, '#b8bcc4', '', boxes, { n: -1, parentNode: n, count: aggN, value: aggV, x: cx, w: aggV * scale, row: r + 1 });
        }
      }
    }
    state.boxes = boxes;
    state.drawMs = performance.now() - t0;
    $('ts-status').textContent = boxes.length + ' boxes drawn in ' + state.drawMs.toFixed(1) + ' ms \u00b7 ' +
      (N - 1).toLocaleString() + ' call-tree nodes, depth ' + maxDepth + ' \u00b7 click a frame to zoom, Esc to reset';
  }
  function label(n) { return n === 0 ? 'all (' + describeTotal() + ')' : shortLabel[nframe[n]]; }

  var pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; draw(); });
  }

  // ---- numbers ----
  function fmtTime(ns) {
    if (ns >= 1e9) return (ns / 1e9).toFixed(ns >= 1e11 ? 0 : 2) + ' s';
    if (ns >= 1e6) return (ns / 1e6).toFixed(ns >= 1e8 ? 0 : 1) + ' ms';
    if (ns >= 1e3) return (ns / 1e3).toFixed(1) + ' \u00b5s';
    return Math.round(ns) + ' ns';
  }
  function pct(a, b) { return b > 0 ? (100 * a / b).toFixed(a === b ? 0 : 2) + '%' : '\u2013'; }
  function fmtN(x) { return Math.round(x).toLocaleString(); }
  function describeTotal() { return fmtN(cumC[0]) + ' samples' + (cumW[0] > 0 ? ', ' + fmtTime(cumW[0]) : ''); }

  // ---- hit testing, tooltip, zoom ----
  function boxAt(clientX, clientY) {
    var rect = canvas.getBoundingClientRect(), x = clientX - rect.left, y = clientY - rect.top + view.scrollTop;
    var row = Math.floor(y / ROW), b = state.boxes;
    for (var k = b.length - 1; k >= 0; k--) {
      if (b[k].row === row && x >= b[k].x && x < b[k].x + Math.max(b[k].w, 1)) return b[k];
    }
    return null;
  }

  function tipRow(name, value) {
    var tr = document.createElement('tr'), a = document.createElement('td'), b = document.createElement('td');
    a.textContent = name; b.textContent = value; tr.appendChild(a); tr.appendChild(b);
    return tr;
  }
  function showTip(b, ev) {
    tip.textContent = '';
    var head = document.createElement('div'), where = document.createElement('div'), table = document.createElement('table');
    head.className = 'n'; where.className = 'f';
    var metricTotal = val[0];
    if (b.n < 0) {
      head.textContent = b.count + ' smaller frames (each under ' + MIN_PX + ' px)';
      where.textContent = 'inside ' + nodeName(b.parentNode) + ' \u00b7 click to zoom into it';
      table.appendChild(tipRow(state.metric === 'weight' ? 'time' : 'samples',
        state.metric === 'weight' ? fmtTime(b.value) : fmtN(b.value)));
      table.appendChild(tipRow('of total', pct(b.value, metricTotal)));
    } else {
      var n = b.n, p = parent[n];
      head.textContent = n === 0 ? 'all threads shown' : nodeName(n);
      where.textContent = n === 0 ? (state.thread === 'all' ? 'every thread merged' : threadLabel(state.thread)) :
        nodeWhere(n) + (fKind(nframe[n]) !== 'python' ? ' [' + fKind(nframe[n]) + ']' : '');
      table.appendChild(tipRow('samples', fmtN(cumC[n]) + ' (self ' + fmtN(selfC[n]) + ')'));
      if (cumW[0] > 0) table.appendChild(tipRow('time', fmtTime(cumW[n]) + ' (self ' + fmtTime(selfW[n]) + ')'));
      table.appendChild(tipRow('of total', pct(val[n], metricTotal)));
      if (p >= 0) table.appendChild(tipRow('of parent', pct(val[n], val[p])));
      if (state.zoom !== 0 && n !== state.zoom && depth[n] > depth[state.zoom]) table.appendChild(tipRow('of zoomed', pct(val[n], val[state.zoom])));
    }
    tip.appendChild(head); tip.appendChild(where); tip.appendChild(table);
    tip.hidden = false;
    var tw = tip.offsetWidth, th = tip.offsetHeight;
    var left = ev.clientX + 14, topPx = ev.clientY + 16;
    if (left + tw > window.innerWidth - 4) left = Math.max(4, ev.clientX - tw - 14);
    if (topPx + th > window.innerHeight - 4) topPx = Math.max(4, ev.clientY - th - 12);
    tip.style.left = left + 'px'; tip.style.top = topPx + 'px';
  }

  function zoomTo(n) {
    state.zoom = val[n] > 0 ? n : 0;
    var crumbs = $('ts-crumbs');
    crumbs.textContent = '';
    if (state.zoom === 0) {
      crumbs.textContent = 'Whole profile: ' + describeTotal();
    } else {
      var path = [];
      for (var a = state.zoom; a > 0; a = parent[a]) path.push(a);
      crumbs.appendChild(document.createTextNode('Zoomed into '));
      var b = document.createElement('b'); b.id = 'ts-zoom-label'; b.textContent = nodeName(state.zoom);
      crumbs.appendChild(b);
      crumbs.appendChild(document.createTextNode(' (' + nodeWhere(state.zoom) + ') \u00b7 ' + pct(val[state.zoom], val[0]) +
        ' of total \u00b7 depth ' + path.length));
      crumbs.title = path.reverse().map(nodeName).join(' \u203a ');
    }
    // keep the zoomed frame in view when the tree is taller than the window
    var want = Math.max(0, (depth[state.zoom] - 2) * ROW);
    if (view.scrollTop > want) view.scrollTop = want;
    updateSearch();
    redraw();
  }

  // ---- search ----
  function compile(q) {
    var m = /^\/(.+)\/([i]*)$/.exec(q);
    if (m) { try { var re = new RegExp(m[1], m[2]); return function (s) { return re.test(s); }; } catch (e) { return null; } }
    var low = q.toLowerCase();
    return function (s) { return s.toLowerCase().indexOf(low) >= 0; };
  }
  function updateSearch() {
    var q = state.query, out = $('ts-match');
    if (!q) { state.matched = null; state.matchPct = null; out.textContent = ''; return; }
    var test = compile(q);
    if (!test) { state.matched = null; state.matchPct = null; out.textContent = 'bad regex'; return; }
    var frameHit = new Uint8Array(NF), f;
    for (f = 0; f < NF; f++) frameHit[f] = test(funcName(f) + ' ' + funcFile(f) + ':' + fLine(f)) ? 1 : 0;
    var hit = new Uint8Array(N), cover = new Uint8Array(N), sum = 0, zsum = 0;
    for (var n = 1; n < N; n++) {
      hit[n] = frameHit[nframe[n]];
      // count each sample once: only the outermost match on a path adds its total
      cover[n] = cover[parent[n]] || hit[n];
      if (hit[n] && !cover[parent[n]]) sum += val[n];
    }
    if (state.zoom !== 0) {
      var inZoom = new Uint8Array(N); inZoom[state.zoom] = 1;
      for (n = state.zoom + 1; n < N; n++) {
        inZoom[n] = inZoom[parent[n]];
        if (inZoom[n] && hit[n] && !(cover[parent[n]] && inZoom[parent[n]])) zsum += val[n];
      }
      if (hit[state.zoom] || cover[state.zoom]) zsum = val[state.zoom];
    }
    state.matched = hit;
    state.matchPct = val[0] > 0 ? 100 * sum / val[0] : 0;
    out.textContent = 'Matched: ' + pct(sum, val[0]) + (state.zoom !== 0 ? ' (' + pct(zsum, val[state.zoom]) + ' of zoomed)' : '');
  }

  // ---- threads ----
  function threadLabel(tid) {
    for (var k = 0; k < D.threads.length; k++) if (String(D.threads[k].tid) === tid) {
      var t = D.threads[k];
      return (t.name || 'thread') + ' (' + t.tid + ')';
    }
    return tid;
  }
  function fillThreads() {
    var sel = $('ts-thread'), total = 0;
    D.threads.forEach(function (t) { total += t.samples; });
    var opt = new Option((D.threads.length === 1 ? 'The only thread' : 'All ' + D.threads.length + ' threads merged') +
      ' \u2013 ' + fmtN(total) + ' samples', 'all');
    sel.appendChild(opt);
    D.threads.slice().sort(function (a, b) { return b.samples - a.samples; }).forEach(function (t) {
      sel.appendChild(new Option(threadLabel(String(t.tid)) + ' \u2013 ' + fmtN(t.samples) + ' samples', String(t.tid)));
    });
    sel.disabled = D.threads.length < 2;
  }
  function setView() {
    var zoomed = state.zoom;
    computeTotals();
    zoomTo(zoomed);
  }

  // ---- events ----
  canvas.addEventListener('mousemove', function (ev) {
    var b = boxAt(ev.clientX, ev.clientY);
    if (b) showTip(b, ev); else tip.hidden = true;
  });
  canvas.addEventListener('mouseleave', function () { tip.hidden = true; });
  canvas.addEventListener('click', function (ev) {
    var b = boxAt(ev.clientX, ev.clientY);
    if (!b) return;
    zoomTo(b.n < 0 ? b.parentNode : b.n);
    showTip(b, ev);
  });
  $('ts-reset').addEventListener('click', function () { zoomTo(0); });
  $('ts-thread').addEventListener('change', function (ev) { state.thread = ev.target.value; setView(); });
  $('ts-metric').addEventListener('change', function (ev) { state.metric = ev.target.value; setView(); });
  var searchTimer = 0;
  $('ts-search').addEventListener('input', function (ev) {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(function () { state.query = ev.target.value.trim(); updateSearch(); redraw(); }, 120);
  });
  document.addEventListener('keydown', function (ev) {
    if (ev.key === 'Escape') { if (document.activeElement === $('ts-search')) { $('ts-search').value = ''; state.query = ''; updateSearch(); } zoomTo(0); }
    else if (ev.key === '/' && document.activeElement !== $('ts-search')) { ev.preventDefault(); $('ts-search').focus(); }
  });
  view.addEventListener('scroll', function () { tip.hidden = true; canvas.style.top = view.scrollTop + 'px'; draw(); });
  window.addEventListener('resize', function () { resize(); redraw(); });

  // ---- start ----
  fillThreads();
  resize();
  computeTotals();
  zoomTo(0);
  draw();

  // A small read-only handle for tests and for poking at the page from the console.
  window.truestackFlame = {
    ready: true,
    nodes: N - 1,
    state: function () {
      return { thread: state.thread, metric: state.metric, zoom: state.zoom, zoomName: nodeName(state.zoom),
               zoomValue: val[state.zoom], total: val[0], totalSamples: cumC[0], totalWeight: cumW[0],
               boxes: state.boxes.length, drawMs: state.drawMs, matchPct: state.matchPct, redrawPending: pending,
               matchedBoxes: state.matched ? state.boxes.filter(function (b) { return b.n >= 0 && state.matched[b.n]; }).length : 0 };
    },
    // client-space rectangle of the widest drawn box of a function, to aim real mouse clicks at
    boxOf: function (name) {
      var best = null;
      this.drawn().forEach(function (b) { if (b.node > 0 && b.name === name && (!best || b.w > best.w)) best = b; });
      return best;
    },
    // every node box currently drawn, in client coordinates
    drawn: function () {
      var rect = canvas.getBoundingClientRect();
      return state.boxes.filter(function (b) { return b.n >= 0; }).map(function (b) {
        return { name: nodeName(b.n), node: b.n, row: b.row, x: rect.left + b.x, y: rect.top + b.row * ROW - view.scrollTop, w: b.w, h: ROW - 1 };
      });
    },
    draw: draw
  };
})();
