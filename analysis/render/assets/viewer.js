// The HTML report's interactive viewer (analysis/render/render_viewer.cpp writes its data, #gmt-viewer-data; the
// Report's JSON is #gmt-report-data). Drawn with the inlined d3 5.16 (assets/vendor). Every string from the trace goes
// into the page as text (d3's .text(), textContent), never as markup.
//
// Parts, each in an element with an id the browser test (tests/html/test_viewer.py) reads:
//   #viewer-timeline  memory over time of one device: the top stacks as stacked layers (.layer), the exact envelope of
//                     live bytes (the Report's timeline), NVTX ranges as a band, and, below, single allocations as bars
//                     (.alloc) in the visible window; wheel or drag to zoom and pan (d3.zoom), data-domain says where;
//   #stack-panel      the stack of what was clicked last, the user's frame first;
//   #flamegraph       an icicle of bytes by stack (.flame-mode buttons: peak, leaked, allocated);
//   #segment-map      heaps' segments with their blocks and holes at a chosen moment (#moment-select);
//   #findings-panel   the findings; a click zooms to the moment and shows the stack.
(function () {
  'use strict';
  var root = document.getElementById('viewer');
  var viewer = JSON.parse(document.getElementById('gmt-viewer-data').textContent);
  if (!root || !viewer || typeof d3 === 'undefined') return;
  var report = JSON.parse(document.getElementById('gmt-report-data').textContent);
  var stacks = viewer.stacks || {};
  var COLORS = ['#2f6fde', '#e0702b', '#2a9d5c', '#c23b5b', '#7d4fd1', '#1aa3a3', '#b8860b', '#d94fa8', '#5b7d1f',
                '#3c5a99', '#a0522d', '#4682b4'];
  var OTHER_COLOR = '#b7bfca';

  function bytes(n) {
    var units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    if (n < 1024) return n + ' B';
    var value = n / 1024, unit = 0;
    while (value >= 1024 && unit + 1 < units.length) { value /= 1024; unit++; }
    return value.toFixed(2) + ' ' + units[unit];
  }
  function seconds(ns) { return (ns / 1e9).toFixed(ns < 1e7 ? 6 : 3) + ' s'; }
  function stackName(id) {
    var s = stacks[String(id)];
    if (!s) return id ? 'stack ' + id : '(no stack taken)';
    return s.user || (s.lines.length ? s.lines[0] : 'stack ' + id);
  }

  // The page's layout: a toolbar, the timeline, the stack panel beside the flamegraph, the segment map, findings.
  d3.select(root).append('h2').text('Interactive viewer');
  var style = document.createElement('style');
  style.textContent =
      '#viewer .toolbar{display:flex;gap:8px;flex-wrap:wrap;align-items:center;margin:6px 0}' +
      '#viewer button{font:inherit;font-size:12px;padding:2px 8px;border:1px solid #c5ccd6;background:#fff;' +
      'border-radius:3px;cursor:pointer}#viewer button.on{background:#1d2330;color:#fff}' +
      '#viewer svg{background:#f4f6f9;border-radius:4px;display:block;width:100%}' +
      '#viewer .layer{cursor:pointer}#viewer .alloc{cursor:pointer}#viewer .flame-node{cursor:pointer}' +
      '#viewer .block{cursor:pointer}#viewer .selected{stroke:#000;stroke-width:1.5px}' +
      '#stack-panel{border:1px solid #d9dee5;border-radius:4px;padding:6px 10px;min-height:48px;margin:8px 0}' +
      '#stack-panel ol{margin:4px 0;padding-left:24px}#stack-panel li{font:12px ui-monospace,monospace;' +
      'word-break:break-all}#stack-panel .user{font-weight:600}#findings-panel li{cursor:pointer;margin:3px 0}' +
      '#viewer .note{font-size:12px;color:#5f6b7a}';
  root.appendChild(style);

  var toolbar = d3.select(root).append('div').attr('class', 'toolbar');
  var timelineBox = d3.select(root).append('div').attr('id', 'viewer-timeline');
  var panel = d3.select(root).append('div').attr('id', 'stack-panel');
  panel.append('div').attr('class', 'note').text('Click a layer, an allocation, a flamegraph node, a block or a ' +
                                                 'finding to see its call stack here.');

  // The stack panel: a title, the user's frame first, then the stack as the text report shows it.
  function showStack(title, stackId, extra) {
    panel.selectAll('*').remove();
    panel.attr('data-stack', String(stackId || 0));
    panel.append('div').attr('class', 'stack-title').text(title);
    if (extra) panel.append('div').attr('class', 'note').text(extra);
    var s = stacks[String(stackId)];
    if (!s) { panel.append('div').attr('class', 'note').text('No call stack was taken for it.'); return; }
    if (s.user) panel.append('div').attr('class', 'user').text('your code: ' + s.user);
    var list = panel.append('ol');
    s.lines.forEach(function (line) { list.append('li').text(line); });
  }

  // ---- memory over time ----
  var devices = [];
  (viewer.layers || []).forEach(function (l) { if (devices.indexOf(l.device) < 0) devices.push(l.device); });
  (report.timeline.series || []).forEach(function (s) { if (devices.indexOf(s.device) < 0) devices.push(s.device); });
  devices.sort(function (a, b) { return a - b; });
  var current = { device: devices.length ? devices[0] : 0, level: 'all' };
  var W = 1100, H = 300, LANE_H = 150, M = { left: 70, right: 16, top: 10, bottom: 24 };
  var duration = Math.max(1, viewer.duration_ns);
  var x0 = d3.scaleLinear().domain([0, duration]).range([M.left, W - M.right]);
  var x = x0.copy();
  var svg = timelineBox.append('svg').attr('viewBox', '0 0 ' + W + ' ' + (H + LANE_H + 40))
                .attr('data-domain-start', 0).attr('data-domain-end', duration);
  svg.append('defs').append('clipPath').attr('id', 'viewer-clip').append('rect')
      .attr('x', M.left).attr('y', 0).attr('width', W - M.left - M.right).attr('height', H + LANE_H + 40);
  var plot = svg.append('g').attr('clip-path', 'url(#viewer-clip)');
  var layersG = plot.append('g'), envelopeG = plot.append('g'), rangesG = plot.append('g'), allocG = plot.append('g');
  var xAxisG = svg.append('g').attr('transform', 'translate(0,' + (H - M.bottom) + ')');
  var yAxisG = svg.append('g').attr('transform', 'translate(' + M.left + ',0)');
  svg.append('text').attr('x', M.left).attr('y', H + 8).attr('class', 'note').attr('font-size', 11)
      .text('single allocations in the window (zoom in to see them all)');
  var allocNote = d3.select(root).append('div').attr('class', 'note').attr('id', 'allocations-note');
  var legend = d3.select(root).append('div').attr('class', 'toolbar').attr('id', 'layer-legend');

  devices.forEach(function (device) {
    toolbar.append('button').attr('class', 'device-button').attr('data-device', device)
        .text(device >= 0 ? 'device ' + device : 'host memory')
        .on('click', function () { current.device = device; drawTimeline(); });
  });
  ['all', 'cuda', 'block'].forEach(function (level) {
    toolbar.append('button').attr('class', 'level-button').attr('data-level', level)
        .text(level === 'all' ? 'all allocations' : level === 'cuda' ? 'CUDA level' : 'tensor/heap blocks')
        .on('click', function () { current.level = level; drawAllocations(); markButtons(); });
  });
  toolbar.append('button').attr('id', 'viewer-zoom-reset').text('reset zoom')
      .on('click', function () { svg.call(zoom.transform, d3.zoomIdentity); });

  function markButtons() {
    toolbar.selectAll('.device-button').classed('on', function () {
      return Number(this.getAttribute('data-device')) === current.device;
    });
    toolbar.selectAll('.level-button').classed('on', function () {
      return this.getAttribute('data-level') === current.level;
    });
  }

  var zoom = d3.zoom().scaleExtent([1, 1e9]).translateExtent([[M.left, 0], [W - M.right, H]])
                 .extent([[M.left, 0], [W - M.right, H]]).on('zoom', function () {
                   x = d3.event.transform.rescaleX(x0);
                   svg.attr('data-domain-start', Math.round(x.domain()[0])).attr('data-domain-end',
                                                                                 Math.round(x.domain()[1]));
                   redraw();
                 });
  svg.call(zoom);

  var yScale = d3.scaleLinear().range([H - M.bottom, M.top]);
  var layerData = null;

  function envelopeOf(device) {
    // The Report's buckets of every kind on the device, summed: the exact most live bytes of each bucket.
    var series = (report.timeline.series || []).filter(function (s) { return s.device === device; });
    var points = {};
    series.forEach(function (s) {
      s.buckets.forEach(function (b) { points[b.start_ns] = (points[b.start_ns] || 0) + b.max_bytes; });
    });
    return Object.keys(points).map(Number).sort(function (a, b) { return a - b; })
        .map(function (t) { return [t, points[t]]; });
  }

  function drawTimeline() {
    markButtons();
    var layers = (viewer.layers || []).filter(function (l) { return l.device === current.device; })[0];
    var keys = [];
    var rows = [];
    if (layers) {
      keys = layers.stacks.map(function (id, i) { return 'k' + i; });
      keys.push('other');
      for (var b = 0; b < layers.other.length; b++) {
        var row = { t: (b + 1) * viewer.bucket_ns };
        layers.stacks.forEach(function (id, i) { row['k' + i] = layers.bytes[i][b]; });
        row.other = layers.other[b];
        rows.push(row);
      }
      rows.unshift(Object.assign({}, rows[0] || {}, { t: 0 }));
      keys.forEach(function (k) { if (rows.length) rows[0][k] = 0; });
    }
    layerData = { keys: keys, series: d3.stack().keys(keys)(rows), layers: layers };
    var envelope = envelopeOf(current.device);
    var high = d3.max(envelope, function (p) { return p[1]; }) || 0;
    layerData.series.forEach(function (s) { s.forEach(function (p) { high = Math.max(high, p[1]); }); });
    yScale.domain([0, Math.max(1, high)]);
    yAxisG.call(d3.axisLeft(yScale).ticks(5).tickFormat(function (v) { return bytes(v); }));
    layerData.envelope = envelope;

    legend.selectAll('*').remove();
    legend.append('span').attr('class', 'note').text('line: CUDA-level live bytes (every counted kind; a ' +
                                                      'caching allocator\u2019s cache included); layers: what the ' +
                                                      'app held, by call stack:');
    keys.forEach(function (k, i) {
      var id = k === 'other' ? null : layers.stacks[i];
      legend.append('span').attr('class', 'legend-item').style('border-left', '10px solid ' + color(i, k))
          .style('padding-left', '4px').text(k === 'other' ? 'other stacks' : stackName(id));
    });
    redraw();
  }

  function color(i, key) { return key === 'other' ? OTHER_COLOR : COLORS[i % COLORS.length]; }

  function redraw() {
    xAxisG.call(d3.axisBottom(x).ticks(8).tickFormat(function (v) { return seconds(v); }));
    if (!layerData) return;
    var area = d3.area().curve(d3.curveStepBefore).x(function (p) { return x(p.data.t); })
                   .y0(function (p) { return yScale(p[0]); }).y1(function (p) { return yScale(p[1]); });
    var paths = layersG.selectAll('path.layer').data(layerData.series, function (s) { return s.key; });
    paths.exit().remove();
    paths.enter().append('path').attr('class', 'layer')
        .on('click', function (s) {
          layersG.selectAll('path.layer').classed('selected', false);
          d3.select(this).classed('selected', true);
          if (s.key === 'other') {
            showStack('other stacks on this device', 0, 'every stack outside the top ' +
                      (layerData.layers.stacks.length) + ', summed');
            return;
          }
          var index = Number(s.key.slice(1));
          var id = layerData.layers.stacks[index];
          var most = d3.max(layerData.layers.bytes[index]);
          showStack('layer: ' + stackName(id), id, 'at most ' + bytes(most) + ' live at once from this stack');
        })
        .merge(paths)
        .attr('data-stack', function (s) {
          return s.key === 'other' ? 'other' : String(layerData.layers.stacks[Number(s.key.slice(1))]);
        })
        .attr('fill', function (s) { return color(layerData.keys.indexOf(s.key), s.key); })
        .attr('fill-opacity', 0.85).attr('d', area);
    var line = d3.line().curve(d3.curveStepAfter).x(function (p) { return x(p[0]); })
                   .y(function (p) { return yScale(p[1]); });
    var env = envelopeG.selectAll('path.envelope').data([layerData.envelope]);
    env.enter().append('path').attr('class', 'envelope').attr('fill', 'none').attr('stroke', '#1d2330')
        .attr('stroke-width', 1).merge(env).attr('d', line);
    drawRanges();
    drawAllocations();
  }

  // NVTX ranges (the Report's spans) as a band under the time axis.
  function drawRanges() {
    var spans = (report.range_spans || []).filter(function (r) { return r.depth <= 0; });
    var bars = rangesG.selectAll('rect.range').data(spans);
    bars.exit().remove();
    bars.enter().append('rect').attr('class', 'range').attr('height', 6).attr('fill', '#9db4f0')
        .each(function (r) { d3.select(this).append('title').text(r.name || '(unnamed range)'); })
        .merge(bars)
        .attr('y', H - M.bottom + 18)
        .attr('x', function (r) { return x(r.start_ns); })
        .attr('width', function (r) {
          var end = r.end_ns === null ? duration : r.end_ns;
          return Math.max(1, x(end) - x(r.start_ns));
        });
  }

  // Single allocations overlapping the window, as bars in lanes (first free lane), at most MAX_BARS of them.
  var MAX_BARS = 1500;
  var columns = viewer.allocations.columns;
  var COL = {};
  columns.forEach(function (name, i) { COL[name] = i; });
  function drawAllocations() {
    var lo = x.domain()[0], hi = x.domain()[1];
    var rows = viewer.allocations.rows.filter(function (r) {
      if (r[COL.device] !== current.device) return false;
      if (current.level === 'cuda' && r[COL.block]) return false;
      if (current.level === 'block' && !r[COL.block]) return false;
      var end = r[COL.free_ns] === null ? duration : r[COL.free_ns];
      return r[COL.alloc_ns] <= hi && end >= lo;
    });
    var inWindow = rows.length;
    if (rows.length > MAX_BARS) {
      rows = rows.slice().sort(function (a, b) { return b[COL.size] - a[COL.size]; }).slice(0, MAX_BARS);
      rows.sort(function (a, b) { return a[COL.alloc_ns] - b[COL.alloc_ns]; });
    }
    var laneEnds = [], lanes = 24, laneH = (LANE_H - 8) / lanes;
    var placed = rows.map(function (r) {
      var end = r[COL.free_ns] === null ? duration : r[COL.free_ns];
      var px0 = x(r[COL.alloc_ns]), px1 = Math.max(px0 + 1, x(end));
      var lane = 0;
      while (lane < laneEnds.length && laneEnds[lane] > px0) lane++;
      if (lane >= lanes) lane = lanes - 1;
      laneEnds[lane] = px1;
      return { row: r, x: px0, w: px1 - px0, lane: lane };
    });
    var bars = allocG.selectAll('rect.alloc').data(placed);
    bars.exit().remove();
    bars.enter().append('rect').attr('class', 'alloc')
        .on('click', function (p) {
          var r = p.row;
          allocG.selectAll('rect.alloc').classed('selected', false);
          d3.select(this).classed('selected', true);
          var end = r[COL.free_ns] === null ? 'live at the end' : 'freed at ' + seconds(r[COL.free_ns]);
          showStack((r[COL.block] ? 'block ' : 'allocation ') + bytes(r[COL.size]) + ' at ' + r[COL.address], r[COL.stack],
                    r[COL.api] + ', ' + r[COL.memory_kind] + ', allocated at ' + seconds(r[COL.alloc_ns]) + ', ' + end);
        })
        .merge(bars)
        .attr('x', function (p) { return p.x; }).attr('width', function (p) { return p.w; })
        .attr('y', function (p) { return H + 14 + p.lane * laneH; }).attr('height', Math.max(2, laneH - 1))
        .attr('fill', function (p) { return p.row[COL.block] ? '#e0702b' : '#2f6fde'; })
        .attr('data-size', function (p) { return p.row[COL.size]; })
        .attr('data-stack', function (p) { return p.row[COL.stack]; });
    var a = viewer.allocations;
    allocNote.text(inWindow + ' of the ' + a.rows.length + ' allocations kept are in this window' +
                   (inWindow > MAX_BARS ? ' (the ' + MAX_BARS + ' largest drawn)' : '') + '. The page keeps the ' +
                   a.per_window + ' largest allocations of each ' + seconds(a.window_ns) + ' of the run: ' +
                   a.rows.length + ' of ' + a.total + '; ' + a.not_shown + ' (' + bytes(a.not_shown_bytes) +
                   ') are only in the layers and totals.');
  }

  drawTimeline();

  // ---- flamegraph ----
  var flameBox = d3.select(root).append('div').attr('id', 'flamegraph');
  var flameBar = flameBox.append('div').attr('class', 'toolbar');
  flameBox.append('h3').attr('class', 'flame-title');
  var flameSvg = flameBox.append('svg').attr('viewBox', '0 0 ' + W + ' 320');
  var MODES = { peak: 'live at the peak', leaked: 'leaked (live at the end)', allocated: 'allocated in total' };
  Object.keys(MODES).forEach(function (mode) {
    flameBar.append('button').attr('class', 'flame-mode').attr('data-mode', mode).text(MODES[mode])
        .on('click', function () { drawFlame(mode); });
  });

  function flameTree(mode) {
    var rootNode = { name: 'all', children: {}, value: 0 };
    (viewer.flame[mode] || []).forEach(function (item) {
      var s = stacks[String(item.stack)];
      var frames = s ? s.frames.slice() : ['(no stack)'];
      if (mode === 'peak') frames.unshift(item.device >= 0 ? 'device ' + item.device : 'host memory');
      var node = rootNode;
      frames.forEach(function (name, depth) {
        node.children[name] = node.children[name] || { name: name, children: {}, value: 0, stack: null };
        node = node.children[name];
        if (depth === frames.length - 1) node.stack = item.stack;
      });
      node.value += item.bytes;
    });
    if (mode === 'allocated' && viewer.flame.allocated_other_bytes > 0) {
      rootNode.children['(other stacks)'] = { name: '(other stacks)', children: {},
                                              value: viewer.flame.allocated_other_bytes };
    }
    function toArrays(node) {
      var kids = Object.keys(node.children).map(function (k) { return toArrays(node.children[k]); });
      return { name: node.name, value: node.value, stack: node.stack, children: kids };
    }
    return toArrays(rootNode);
  }

  function drawFlame(mode) {
    flameBar.selectAll('.flame-mode').classed('on', function () { return this.getAttribute('data-mode') === mode; });
    flameBox.attr('data-mode', mode);
    var hierarchy = d3.hierarchy(flameTree(mode), function (d) { return d.children; })
                        .sum(function (d) { return d.value; })
                        .sort(function (a, b) { return b.value - a.value; });
    flameBox.select('.flame-title').text('Bytes by call stack, ' + MODES[mode] + ': ' + bytes(hierarchy.value || 0));
    var depth = Math.max(1, hierarchy.height + 1);
    var rowH = Math.min(22, 320 / depth);
    flameSvg.attr('viewBox', '0 0 ' + W + ' ' + Math.ceil(depth * rowH + 2));
    d3.partition().size([W, depth * rowH])(hierarchy);
    var nodes = hierarchy.descendants().filter(function (n) { return n.x1 - n.x0 >= 0.5; });
    flameSvg.selectAll('g.flame-node').remove();
    var g = flameSvg.selectAll('g.flame-node').data(nodes).enter().append('g').attr('class', 'flame-node')
                .attr('data-name', function (n) { return n.data.name; })
                .attr('data-bytes', function (n) { return n.value; })
                .attr('transform', function (n) { return 'translate(' + n.x0 + ',' + n.y0 + ')'; })
                .on('click', function (n) {
                  var leaf = n;
                  while (leaf.data.stack === null && leaf.children && leaf.children.length) leaf = leaf.children[0];
                  showStack(n.data.name + ': ' + bytes(n.value) + ' (' + MODES[mode] + ')', leaf.data.stack,
                            n.data.stack === null ? 'the largest stack under this frame:' : null);
                });
    g.append('rect').attr('width', function (n) { return Math.max(0.5, n.x1 - n.x0 - 0.5); })
        .attr('height', rowH - 1).attr('fill', function (n) { return n.depth === 0 ? '#c5ccd6' : COLORS[n.depth % 6]; })
        .attr('fill-opacity', 0.8);
    g.append('title').text(function (n) { return n.data.name + ': ' + bytes(n.value); });
    g.append('text').attr('x', 3).attr('y', rowH * 0.7).attr('font-size', 11).attr('fill', '#111')
        .text(function (n) {
          var room = Math.floor((n.x1 - n.x0 - 6) / 6.5);
          return room < 3 ? '' : n.data.name.length > room ? n.data.name.slice(0, room - 1) + '\u2026' : n.data.name;
        });
  }
  drawFlame('peak');

  // ---- segment map ----
  var mapBox = d3.select(root).append('div').attr('id', 'segment-map');
  mapBox.append('h3').text('Heaps\u2019 segments: live blocks and free holes');
  var moments = viewer.heap_moments || [];
  if (!moments.length) {
    mapBox.append('p').attr('class', 'note').text(
        'No heap was recorded (PyTorch\u2019s caching allocator with tensor blocks, or an allocator that describes ' +
        'itself with the NVTX memory API): a plain CUDA allocation has no blocks inside it.');
  } else {
    var select = mapBox.append('select').attr('id', 'moment-select').on('change', function () {
      drawMap(Number(this.value));
    });
    moments.forEach(function (m, i) {
      select.append('option').attr('value', i).text(m.label + ' (' + seconds(m.time_ns) + ')');
    });
    var mapSummary = mapBox.append('p').attr('class', 'note').attr('id', 'segment-summary');
    var mapSvg = mapBox.append('svg');
    var drawMap = function (index) {
      var moment = moments[index];
      mapBox.attr('data-moment', moment.label);
      var segments = moment.segments;
      var rowH = 18, height = Math.max(20, segments.length * (rowH + 4) + 10);
      mapSvg.attr('viewBox', '0 0 ' + W + ' ' + height);
      mapSvg.selectAll('*').remove();
      var free = 0, largest = 0, held = 0;
      var rows = mapSvg.selectAll('g.segment').data(segments).enter().append('g').attr('class', 'segment')
                     .attr('data-address', function (s) { return s.address; })
                     .attr('data-size', function (s) { return s.size; })
                     .attr('transform', function (s, i) { return 'translate(0,' + (5 + i * (rowH + 4)) + ')'; });
      rows.append('text').attr('x', 0).attr('y', rowH * 0.75).attr('font-size', 10)
          .text(function (s) { return 'dev ' + s.device + ' ' + bytes(s.size); });
      rows.each(function (s) {
        var scale = d3.scaleLinear().domain([0, s.size]).range([M.left + 30, W - M.right]);
        d3.select(this).selectAll('rect.block').data(s.blocks).enter().append('rect')
            .attr('class', function (b) { return b[2] ? 'block held' : 'block hole'; })
            .attr('x', function (b) { return scale(b[0]); }).attr('y', 0)
            .attr('width', function (b) { return Math.max(0.5, scale(b[0] + b[1]) - scale(b[0])); })
            .attr('height', rowH).attr('fill', function (b) { return b[2] ? '#2f6fde' : '#ffffff'; })
            .attr('stroke', '#8a94a3').attr('stroke-width', 0.3)
            .attr('data-size', function (b) { return b[1]; })
            .on('click', function (b) {
              if (b[2]) {
                showStack('block ' + bytes(b[1]) + ' at +' + b[0] + ' in the segment at ' + s.address, b[3],
                          moment.label);
              } else {
                showStack('free hole of ' + bytes(b[1]) + ' at +' + b[0] + ' in the segment at ' + s.address, 0,
                          'cached by the allocator: free for a block that fits');
              }
            });
        s.blocks.forEach(function (b) {
          if (b[2]) { held += b[1]; } else { free += b[1]; largest = Math.max(largest, b[1]); }
        });
      });
      mapSummary.text(segments.length + ' segments at ' + moment.label + ': ' + bytes(held) + ' in live blocks, ' +
                      bytes(free) + ' free in holes, the largest hole ' + bytes(largest) +
                      (free > 0 ? ' (fragmentation ' + (1 - largest / free).toFixed(2) + ')' : '') +
                      (moment.blocks_left_out ? '; ' + moment.blocks_left_out + ' blocks not drawn' : ''));
    };
    drawMap(0);
  }

  // ---- findings ----
  var findingsBox = d3.select(root).append('div').attr('id', 'findings-panel');
  findingsBox.append('h3').text('Findings');
  var findings = report.findings || [];
  if (!findings.length) findingsBox.append('p').attr('class', 'note').text('No findings.');
  var list = findingsBox.append('ul');
  // The stretch of the run a finding is about: a leak's allocations, a failed allocation, a growth window.
  function momentOf(finding) {
    if (finding.kind === 'leak') {
      var leak = (report.leaks || []).filter(function (l) {
        return l.stack_id === finding.stack_id || (l.stack_ids || []).indexOf(finding.stack_id) >= 0;
      })[0];
      if (leak) return [leak.first_alloc_ns, leak.last_alloc_ns];
    }
    if (finding.kind === 'failed_allocation') {
      var failure = (report.failures || []).filter(function (f) { return f.stack_id === finding.stack_id; })[0];
      if (failure) return [failure.time_ns, failure.time_ns];
    }
    if (finding.kind === 'growth') {
      var growth = (report.growth.findings || []).filter(function (g) {
        return (g.stacks || []).some(function (s) { return (s.stack_ids || []).indexOf(finding.stack_id) >= 0; });
      })[0] || (report.growth.findings || [])[0];
      if (growth) return [growth.start_time_ns, growth.end_time_ns];
    }
    return null;
  }
  findings.forEach(function (finding) {
    list.append('li').attr('class', 'finding').attr('data-kind', finding.kind).text(finding.verdict)
        .on('click', function () {
          var span = momentOf(finding);
          if (span) {
            var pad = Math.max((span[1] - span[0]) * 0.1, duration / 1000);
            var a = Math.max(0, span[0] - pad), b = Math.min(duration, span[1] + pad);
            var k = duration / Math.max(1, b - a);
            svg.call(zoom.transform, d3.zoomIdentity.translate(M.left - k * x0(a), 0).scale(k));
          }
          showStack(finding.verdict, finding.stack_id, finding.detail || null);
        });
  });
  document.body.setAttribute('data-viewer-ms', String(Math.round(performance.now())));
})();
