// The HTML report's page: inline CSS and script, nothing fetched from the network. The script reads the
// Report's JSON from the #gmt-report-data element and builds every plot and table with createElement and
// textContent, never innerHTML, so no name from the trace can become markup.
#include "analysis/html_template.h"

namespace gmt::analysis {

std::string_view html_report_template() {
  static constexpr std::string_view kPage = R"GMTHTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>@@GMT_TITLE@@</title>
<style>
  :root { --fg: #1d2330; --muted: #5f6b7a; --line: #d9dee5; --bg: #ffffff; --band: #f4f6f9; }
  body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg);
         margin: 0 auto; max-width: 1200px; padding: 16px 24px 48px; }
  h1 { font-size: 22px; margin: 8px 0 4px; }
  h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
  h3 { font-size: 15px; margin: 16px 0 6px; }
  table { border-collapse: collapse; width: 100%; margin: 6px 0 12px; }
  th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
  th { color: var(--muted); font-weight: 600; font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
  td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
  .meta td:first-child { color: var(--muted); width: 180px; }
  .warning { background: #fff4e0; border: 1px solid #f0c36d; padding: 8px 12px; border-radius: 4px; margin: 8px 0; }
  .simulated { background: #eef3ff; border: 1px solid #9db4f0; padding: 8px 12px; border-radius: 4px; margin: 8px 0; }
  .muted { color: var(--muted); }
  code, .frame { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; font-size: 12.5px; }
  details > summary { cursor: pointer; }
  details ol { margin: 4px 0 4px 0; padding-left: 28px; }
  details li { word-break: break-all; }
  .plot { margin: 8px 0 4px; }
  .plot svg { width: 100%; height: auto; background: var(--band); border-radius: 4px; }
  .legend { font-size: 12px; color: var(--muted); display: flex; flex-wrap: wrap; gap: 14px; margin: 2px 0 10px; }
  .legend span::before { content: ""; display: inline-block; width: 12px; height: 10px; margin-right: 5px;
                         background: var(--swatch); vertical-align: middle; }
  svg text { font: 11px system-ui, sans-serif; fill: var(--muted); }
  svg .marker-label { fill: var(--fg); font-weight: 600; }
</style>
</head>
<body>
@@GMT_HEADER@@
<main id="gmt-report"><noscript><p class="warning">The plots and tables of this report are drawn by its
inline script: enable JavaScript for this file, or read <code>gpumemtrace report --format text</code>.</p></noscript></main>
<script type="application/json" id="gmt-report-data">@@GMT_DATA@@</script>
<script>
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('gmt-report-data').textContent);
  var main = document.getElementById('gmt-report');
  var SVG = 'http://www.w3.org/2000/svg';
  var KIND_COLORS = { device: '#2f6fde', managed: '#8a4fd1', host_pinned: '#1f9e77', vmm_physical: '#c2761b' };

  // Elements with text children only: strings become text nodes, never markup.
  function el(tag, attrs) {
    var node = document.createElement(tag);
    for (var key in (attrs || {})) node.setAttribute(key, String(attrs[key]));
    for (var i = 2; i < arguments.length; i++) append(node, arguments[i]);
    return node;
  }
  function append(node, child) {
    if (child === null || child === undefined) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(node, c); }); return; }
    node.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
  function svgEl(tag, attrs) {
    var node = document.createElementNS(SVG, tag);
    for (var key in (attrs || {})) node.setAttribute(key, String(attrs[key]));
    return node;
  }
  function svgTitle(node, text) {
    var title = svgEl('title');
    title.textContent = text;
    node.appendChild(title);
    return node;
  }

  function bytes(n) {
    var units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
    if (n < 1024) return n + ' B';
    var value = n / 1024, unit = 0;
    while (value >= 1024 && unit + 1 < units.length) { value /= 1024; unit++; }
    return value.toFixed(2) + ' ' + units[unit];
  }
  function duration(ns) {
    if (ns < 0) return '-' + duration(-ns);
    if (ns < 1e3) return ns + ' ns';
    if (ns < 1e6) return (ns / 1e3).toFixed(1) + ' us';
    if (ns < 1e9) return (ns / 1e6).toFixed(2) + ' ms';
    if (ns < 60e9) return (ns / 1e9).toFixed(3) + ' s';
    return Math.floor(ns / 60e9) + ' min ' + ((ns % 60e9) / 1e9).toFixed(1) + ' s';
  }
  function deviceName(device) {
    if (device < 0) return 'host memory';
    var named = (data.devices || []).filter(function (d) { return d.ordinal === device && d.name; })[0];
    return 'device ' + device + (named ? ' (' + named.name + ')' : '');
  }
  function basename(path) { var i = path.lastIndexOf('/'); return i < 0 ? path : path.slice(i + 1); }

  function frameText(frame) {
    var text = frame.function !== null ? frame.function : '?? ' + frame.pc;
    if (frame.file !== null) text += '  ' + frame.file + (frame.line !== null ? ':' + frame.line : '');
    if (frame.module !== null) text += '  [' + basename(frame.module) + ']';
    return text;
  }
  function stackSummary(item) {
    if (item.stack_id === 0) return '(no call stack recorded)';
    if (item.stack_missing) return '(call stack ' + item.stack_id + ' is missing from the trace)';
    if (item.stack.length === 0) return '(empty call stack)';
    if (item.user_frame) return item.user_frame;
    return item.stack_view ? item.stack_view[0] : frameText(item.stack[0]);
  }
  // The user's frame (else the innermost), unfolding to the stack as the text report shows it: start frames
  // dropped, framework frames folded, long C++ names shortened (JSON's stack[] keeps every frame).
  function stackCell(item) {
    var lines = item.stack_view || item.stack.map(frameText);
    if (lines.length <= 1) return el('td', { class: 'frame' }, stackSummary(item));
    var list = el('ol', { start: 0 });
    lines.forEach(function (line) { list.appendChild(el('li', { class: 'frame' }, line)); });
    return el('td', {}, el('details', {}, el('summary', { class: 'frame' }, stackSummary(item)), list));
  }
  function numCell(value, text) { return el('td', { class: 'num', 'data-bytes': value }, text); }
  function table(headers, rows, attrs) {
    var head = el('tr', {}, headers.map(function (h) {
      return el('th', h.charAt(0) === '#' ? { class: 'num' } : {}, h.replace(/^#/, ''));
    }));
    return el('table', attrs || {}, el('thead', {}, head), el('tbody', {}, rows));
  }
  function section(title, id) {
    var node = el('section', { id: id }, el('h2', {}, title));
    main.appendChild(node);
    return node;
  }

  // ---- the live-bytes timeline, one plot per device ----
  var timeline = data.timeline;
  var end = Math.max(data.trace.duration_ns, timeline.bucket_ns * timeline.bucket_count, 1);
  var ranges = data.range_spans || [];
  var allocatorDevices = data.allocator_stats ? data.allocator_stats.devices : [];

  function devicesShown() {
    var seen = {};
    timeline.series.forEach(function (s) { seen[s.device] = true; });
    data.peak_stacks.forEach(function (p) { seen[p.device] = true; });
    data.failures.forEach(function (f) { seen[f.device] = true; });
    data.growth.findings.forEach(function (g) { seen[g.device] = true; });
    allocatorDevices.forEach(function (a) { seen[a.device] = true; });
    return Object.keys(seen).map(Number).sort(function (a, b) { return a - b; });
  }

  function drawPlot(device) {
    var W = 1100, H = 260, left = 80, right = 16, top = 14, bottom = 30;
    var series = timeline.series.filter(function (s) { return s.device === device; });
    var peak = data.peak_stacks.filter(function (p) { return p.device === device; })[0];
    var failures = data.failures.filter(function (f) { return f.device === device; });
    var findings = data.growth.findings.filter(function (g) { return g.device === device; });
    var pools = (data.pools || []).filter(function (p) { return p.device === device; });
    var high = 1;
    series.forEach(function (s) { s.buckets.forEach(function (b) { high = Math.max(high, b.max_bytes); }); });
    if (peak) high = Math.max(high, peak.bytes);
    pools.forEach(function (p) { high = Math.max(high, p.peak_reserved_bytes); });
    findings.forEach(function (g) { high = Math.max(high, g.start_low_bytes, g.end_low_bytes); });
    var allocator = allocatorDevices.filter(function (a) { return a.device === device; })[0];
    if (allocator) high = Math.max(high, allocator.peak_reserved_bytes);
    high *= 1.08;
    function x(ns) { return left + Math.max(0, Math.min(1, ns / end)) * (W - left - right); }
    function y(b) { return top + (1 - b / high) * (H - top - bottom); }

    var svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'class': 'timeline', 'data-device': device });
    svgTitle(svg, 'live bytes over time, ' + deviceName(device));
    var legend = el('div', { class: 'legend' });

    // NVTX ranges behind everything: one band per range, nested ranges lower and lighter.
    var bands = svgEl('g', { 'class': 'ranges' });
    ranges.forEach(function (r) {
      var x0 = x(r.start_ns), x1 = x(r.end_ns === null ? end : r.end_ns);
      var depth = Math.max(0, r.depth);
      var rect = svgEl('rect', { x: x0, y: top + depth * 4, width: Math.max(1, x1 - x0), height: H - top - bottom - depth * 4,
                                 fill: depth % 2 ? '#e2e8f0' : '#e9edf3', 'fill-opacity': 0.6, 'class': 'range-band' });
      svgTitle(rect, 'NVTX range ' + r.name + (r.domain ? ' (' + r.domain + ')' : '') + ': ' + duration(r.start_ns) +
               ' to ' + (r.end_ns === null ? 'never closed' : duration(r.end_ns)));
      bands.appendChild(rect);
    });
    svg.appendChild(bands);
    if (ranges.length) append(legend, el('span', { style: '--swatch:#e2e8f0' }, 'NVTX ranges'));

    // Axes: four levels, six times.
    for (var i = 0; i <= 4; i++) {
      var level = high / 1.08 * i / 4;
      svg.appendChild(svgEl('line', { x1: left, x2: W - right, y1: y(level), y2: y(level), stroke: '#d9dee5' }));
      var label = svgEl('text', { x: left - 6, y: y(level) + 4, 'text-anchor': 'end' });
      label.textContent = bytes(Math.round(level));
      svg.appendChild(label);
    }
    for (var t = 0; t <= 5; t++) {
      var tick = svgEl('text', { x: x(end * t / 5), y: H - 10, 'text-anchor': t === 0 ? 'start' : t === 5 ? 'end' : 'middle' });
      tick.textContent = duration(Math.round(end * t / 5));
      svg.appendChild(tick);
    }

    // Each bucket is a step from its least to its most live bytes: the band shows spikes that a line through
    // averages would hide.
    var paths = 0;
    series.forEach(function (s) {
      if (!s.buckets.length) return;
      var color = KIND_COLORS[s.memory_kind] || '#555';
      var upper = [], lower = [];
      s.buckets.forEach(function (b) {
        var x0 = x(b.start_ns), x1 = x(b.start_ns + timeline.bucket_ns);
        upper.push(x0.toFixed(1) + ',' + y(b.max_bytes).toFixed(1), x1.toFixed(1) + ',' + y(b.max_bytes).toFixed(1));
        lower.push(x0.toFixed(1) + ',' + y(b.min_bytes).toFixed(1), x1.toFixed(1) + ',' + y(b.min_bytes).toFixed(1));
      });
      var band = svgEl('path', { d: 'M' + upper.join('L') + 'L' + lower.reverse().join('L') + 'Z', fill: color,
                                 'fill-opacity': 0.25, stroke: 'none', 'class': 'live-band' });
      var line = svgEl('path', { d: 'M' + upper.join('L'), fill: 'none', stroke: color, 'stroke-width': 1.5,
                                 'class': 'live-max', 'data-kind': s.memory_kind, 'data-buckets': s.buckets.length });
      svgTitle(line, s.memory_kind + ' memory live on ' + deviceName(device) + ' (most per bucket; band: least to most)');
      svg.appendChild(band);
      svg.appendChild(line);
      paths++;
      append(legend, el('span', { style: '--swatch:' + color }, s.memory_kind + ' live bytes (band: least to most per ' +
                                                                   duration(timeline.bucket_ns) + ')'));
    });

    pools.forEach(function (p) {
      [['peak_reserved_bytes', 'reserved', '6 3'], ['peak_used_bytes', 'used', '2 3']].forEach(function (k) {
        var line = svgEl('line', { x1: left, x2: W - right, y1: y(p[k[0]]), y2: y(p[k[0]]), stroke: '#c2761b',
                                   'stroke-dasharray': k[2], 'class': 'pool-line' });
        svgTitle(line, 'pool ' + p.pool + ' peak ' + k[1] + ': ' + bytes(p[k[0]]));
        svg.appendChild(line);
      });
    });
    if (pools.length) append(legend, el('span', { style: '--swatch:#c2761b' }, 'pool peak reserved (dashed) and used (dotted)'));

    findings.forEach(function (g) {
      var line = svgEl('line', { x1: x(g.start_time_ns), y1: y(g.start_low_bytes), x2: x(g.end_time_ns), y2: y(g.end_low_bytes),
                                 stroke: '#e07b00', 'stroke-width': 2.5, 'stroke-dasharray': '8 4', 'class': 'growth-line' });
      svgTitle(line, 'steady growth: ' + bytes(Math.max(0, g.rate_bytes_per_s)) + '/s');
      svg.appendChild(line);
    });
    if (findings.length) append(legend, el('span', { style: '--swatch:#e07b00' }, 'steady growth of the low watermark'));

    failures.forEach(function (f) {
      var marker = svgEl('line', { x1: x(f.time_ns), x2: x(f.time_ns), y1: top, y2: H - bottom, stroke: '#d12c2c',
                                   'stroke-width': 1.5, 'class': 'failure-marker' });
      svgTitle(marker, 'failed allocation of ' + bytes(f.requested_bytes) + ' at ' + duration(f.time_ns) + ': ' + f.label);
      svg.appendChild(marker);
    });
    if (failures.length) append(legend, el('span', { style: '--swatch:#d12c2c' }, 'failed allocations'));

    if (peak) {
      var px = x(peak.time_ns), py = y(peak.bytes);
      svg.appendChild(svgTitle(svgEl('circle', { cx: px, cy: py, r: 4.5, fill: '#1d2330', 'class': 'peak-marker' }),
                               'peak ' + bytes(peak.bytes) + ' at ' + duration(peak.time_ns)));
      var text = svgEl('text', { x: Math.min(px + 8, W - 160), y: Math.max(py - 6, top + 10), 'class': 'marker-label' });
      text.textContent = 'peak ' + bytes(peak.bytes) + ' at ' + duration(peak.time_ns);
      svg.appendChild(text);
    }
    // The framework allocator's own curve (allocator_stats): a sample's level holds until the next sample.
    if (allocator && allocator.series.length) {
      [['reserved_bytes', 'reserved', '#7a3fb8', null], ['in_use_bytes', 'in use', '#7a3fb8', '5 3']].forEach(function (k) {
        var points = [];
        allocator.series.forEach(function (s, i) {
          var next = i + 1 < allocator.series.length ? allocator.series[i + 1].time_ns : s.time_ns;
          points.push(x(s.time_ns).toFixed(1) + ',' + y(s[k[0]]).toFixed(1), x(next).toFixed(1) + ',' + y(s[k[0]]).toFixed(1));
        });
        var attrs = { d: 'M' + points.join('L'), fill: 'none', stroke: k[2], 'stroke-width': 1.8, 'class': 'allocator-line',
                      'data-figure': k[0], 'data-samples': allocator.series.length };
        if (k[3]) attrs['stroke-dasharray'] = k[3];
        svg.appendChild(svgTitle(svgEl('path', attrs), allocator.allocator_name + ' ' + k[1] + ' (its own statistics), up to ' +
                                 bytes(k[0] === 'reserved_bytes' ? allocator.peak_reserved_bytes : allocator.peak_in_use_bytes)));
        paths++;
      });
      append(legend, el('span', { style: '--swatch:#7a3fb8' }, allocator.allocator_name + ': reserved (solid) and in use (dashed), its own figures'));
    }
    svg.setAttribute('data-drawn', String(paths));  // how many series were drawn: read by the tests
    return el('div', { class: 'plot' }, el('h3', {}, deviceName(device) + (peak ? ': peak ' + bytes(peak.bytes) : '')), svg, legend);
  }

  // ---- the answer first: findings, largest first (analysis/findings.h) ----
  var found = section('Findings, largest first', 'findings');
  if (!data.findings.length) {
    append(found, el('p', { class: data.trace.complete && !data.trace.dropped_events ? 'muted' : 'warning' },
                     data.trace.complete && !data.trace.dropped_events
                       ? (data.totals.allocations ? 'None: nothing was held at exit, nothing grew steadily, no allocation failed.'
                                                  : 'None: the trace recorded no allocations.')
                       : 'None seen, but the trace may be missing events.'));
  }
  var findingList = el('ol', { class: 'findings' });
  data.findings.forEach(function (f) {
    var item = el('li', { class: 'finding', 'data-kind': f.kind, 'data-bytes': f.bytes }, el('strong', {}, f.verdict));
    if (f.user_frame) append(item, el('div', { class: 'frame' }, 'at ' + f.user_frame));
    if (f.source_text) append(item, el('div', { class: 'frame source' }, '| ' + f.source_text));
    if (f.via) append(item, el('div', { class: 'muted' }, 'via ' + f.via));
    if (f.detail) append(item, el('div', { class: 'muted' }, f.detail));
    findingList.appendChild(item);
  });
  if (data.findings.length) append(found, findingList);

  var over = section('Live memory over time', 'timeline');
  var devices = devicesShown();
  if (!devices.length) append(over, el('p', { class: 'muted' }, 'Nothing was ever live.'));
  devices.forEach(function (d) { over.appendChild(drawPlot(d)); });
  if (timeline.series_not_tracked) {
    append(over, el('p', { class: 'warning' }, timeline.series_not_tracked + ' (device, kind) pairs beyond the tracked limit are not drawn.'));
  }

  // ---- leaks ----
  var leaks = section('Leaks: memory still allocated at the end, by call stack', 'leaks');
  if (!data.trace.complete) {
    append(leaks, el('p', { class: 'warning' }, 'The trace is incomplete (the process crashed, was killed or still runs): ' +
                                                  'memory live at its end was not necessarily leaked.'));
  }
  append(leaks, el('p', {}, bytes(data.totals.leaked_bytes) + ' in ' + data.totals.leaked_allocations + ' allocations from ' +
                              data.leak_groups.total + ' call stacks' +
                              (data.leak_groups.not_shown ? '; the ' + data.leak_groups.shown + ' largest are shown' : '') + '.'));
  if (data.leaks.length) {
    append(leaks, table(['#rank', '#bytes', '#allocations', 'API', 'memory', 'allocated at (click for the call stack)'],
      data.leaks.map(function (leak) {
        return el('tr', { 'class': 'leak', 'data-stack-id': leak.stack_id },
                  el('td', { class: 'num' }, leak.rank), numCell(leak.bytes, bytes(leak.bytes)),
                  el('td', { class: 'num' }, leak.count), el('td', {}, leak.apis.join(', ')),
                  el('td', {}, leak.memory_kinds.join(', ')), stackCell(leak));
      }), { id: 'leak-table' }));
  }

  // ---- memory of other processes opened here ----
  var imported = data.imported;
  if (imported && imported.opens) {
    var imp = section('Imported memory: other processes\' memory opened here (in none of the totals above)', 'imported');
    append(imp, table(['device', '#peak', '#opens', '#open at the end'], imported.devices.map(function (d) {
      return el('tr', {}, el('td', {}, deviceName(d.device)), numCell(d.peak_bytes, bytes(d.peak_bytes)),
                el('td', { class: 'num' }, d.opens), numCell(d.open_at_end_bytes, bytes(d.open_at_end_bytes)));
    }), { id: 'imported-table' }));
    if (imported.left_open.length) {
      append(imp, el('p', { class: 'warning' }, 'IPC handles left open: ' + imported.left_open_handles + ' (' +
                                                  bytes(imported.left_open_bytes) + '). They hold no memory of this process, but should be closed.'));
      append(imp, table(['#bytes', '#handles', 'API', 'opened at'], imported.left_open.map(function (g) {
        return el('tr', { 'class': 'left-open' }, numCell(g.bytes, bytes(g.bytes)), el('td', { class: 'num' }, g.count),
                  el('td', {}, g.apis.join(', ')), stackCell(g));
      }), { id: 'left-open-table' }));
    }
  }

  // ---- what was live at each peak ----
  var peaks = section('Live at the peak, by call stack', 'peak');
  data.peak_stacks.forEach(function (peak) {
    append(peaks, el('h3', {}, deviceName(peak.device) + ' peaked at ' + bytes(peak.bytes) + ' at ' + duration(peak.time_ns)));
    append(peaks, table(['#bytes', '#allocations', 'allocated at'], peak.stacks.map(function (held) {
      return el('tr', { 'class': 'peak-stack' }, numCell(held.bytes, bytes(held.bytes)), el('td', { class: 'num' }, held.count),
                stackCell(held));
    }), { 'class': 'peak-table', 'data-device': peak.device }));
    if (peak.stack_groups > peak.stacks.length) {
      append(peaks, el('p', { class: 'muted' }, (peak.stack_groups - peak.stacks.length) + ' more call stacks held memory then.'));
    }
  });

  // ---- growth ----
  var growth = section('Growth of the low watermark', 'growth');
  if (!data.growth.analyzed) {
    append(growth, el('p', { class: 'muted' }, 'Not analyzed: ' + data.growth.reason));
  } else if (!data.growth.findings.length) {
    append(growth, el('p', {}, 'No steady growth (' + data.growth.windows + ' windows of ' + duration(data.growth.window_ns) +
                                 '; the first is the warm-up).'));
  }
  data.growth.findings.forEach(function (g) {
    // A rate per second only from 10 s of growth or more (as the text report): shorter growth is told in bytes.
    var rateHolds = g.end_time_ns - g.start_time_ns >= 10e9;
    var text = deviceName(g.device) + (rateHolds ? ' grows steadily at ' + bytes(Math.max(0, Math.round(g.rate_bytes_per_s))) + '/s'
                                                 : ' grew steadily by ' + bytes(Math.max(0, g.end_low_bytes - g.start_low_bytes))) +
               ': low watermark ' + bytes(g.start_low_bytes) + ' at ' + duration(g.start_time_ns) + ' to ' +
               bytes(g.end_low_bytes) + ' at ' + duration(g.end_time_ns);
    if (rateHolds && g.projection && g.projection.seconds_until_full !== null) {
      text += '; full in ' + duration(Math.round(g.projection.seconds_until_full * 1e9)) + ' at this rate';
    }
    append(growth, el('p', { 'class': 'growth-finding' }, text));
    append(growth, table(['#growth', '#from', '#to', 'allocated at'], g.stacks.map(function (s) {
      return el('tr', {}, numCell(s.growth_bytes, '+' + bytes(s.growth_bytes)), numCell(s.start_bytes, bytes(s.start_bytes)),
                numCell(s.end_bytes, bytes(s.end_bytes)), stackCell(s));
    })));
  });

  // ---- fragmentation where it fails allocations: inside heaps, and pools (render_text_pools.cpp) ----
  var frag = section('Fragmentation inside heaps and pools', 'fragmentation');
  var heapRows = [];
  (data.heap_fragmentation || []).forEach(function (h) {
    [['at its peak (' + bytes(h.peak_held_bytes) + ' held)', h.at_peak, duration(h.peak_time_ns)], ['at the end', h.at_end, '']].forEach(function (m) {
      var s = m[1], ratio = s.free_bytes ? (1 - s.largest_free_bytes / s.free_bytes).toFixed(2) : '';
      heapRows.push(el('tr', {}, el('td', {}, h.allocator + ' on ' + deviceName(h.device) + ' ' + m[0]), el('td', { class: 'num' }, m[2]),
                       numCell(s.reserved_bytes, bytes(s.reserved_bytes)), numCell(s.held_bytes, bytes(s.held_bytes)),
                       numCell(s.free_bytes, bytes(s.free_bytes)), numCell(s.largest_free_bytes, bytes(s.largest_free_bytes)),
                       el('td', { class: 'num' }, ratio)));
    });
  });
  if (heapRows.length) {
    append(frag, el('p', { class: 'muted' }, 'Free bytes in holes between live blocks of each heap whose layout the trace shows; ratio = 1 - largest hole / free.'));
    append(frag, table(['heap', '#time', '#reserved', '#held', '#free in holes', '#largest hole', '#ratio'], heapRows));
    (data.heap_fragmentation || []).forEach(function (h) {
      var name = h.allocator + ' on ' + deviceName(h.device);
      // Which live blocks pin the holes (blocks in segments that have free bytes), by call stack.
      var pinRows = [];
      [['at its peak', h.pinned_at_peak || []], ['at the end', h.pinned_at_end || []]].forEach(function (m) {
        m[1].forEach(function (p) {
          pinRows.push(el('tr', {}, el('td', {}, m[0]), el('td', { class: 'num' }, p.blocks), numCell(p.bytes, bytes(p.bytes)),
                          el('td', { class: 'num' }, p.segments), numCell(p.free_bytes, bytes(p.free_bytes)), stackCell(p)));
        });
      });
      if (pinRows.length) {
        append(frag, el('h3', {}, 'Holes pinned by live blocks: ' + name));
        append(frag, table(['moment', '#blocks', '#held', '#segments', '#free pinned', 'allocated at'], pinRows, { class: 'heap-pins' }));
      }
      // The heap over time, at most 12 rows: each row a stretch of buckets, showing the one with the most free in holes.
      var series = h.over_time || [];
      if (!series.some(function (b) { return b.free_bytes > 0; })) return;
      var rows = [], stretches = Math.min(12, series.length);
      for (var i = 0; i < stretches; ++i) {
        var from = Math.floor(i * series.length / stretches), to = Math.floor((i + 1) * series.length / stretches), best = series[from];
        for (var j = from; j < to; ++j) if (series[j].free_bytes > best.free_bytes) best = series[j];
        rows.push(el('tr', {}, el('td', { class: 'num' }, duration(series[from].time_ns) + ' to ' + duration(series[to - 1].time_ns + h.bucket_ns)),
                      el('td', { class: 'num' }, duration(best.time_ns)), numCell(best.reserved_bytes, bytes(best.reserved_bytes)),
                      numCell(best.held_bytes, bytes(best.held_bytes)), numCell(best.free_bytes, bytes(best.free_bytes)),
                      numCell(best.largest_free_bytes, bytes(best.largest_free_bytes)),
                      el('td', { class: 'num' }, best.free_bytes ? (1 - best.largest_free_bytes / best.free_bytes).toFixed(2) : '')));
      }
      append(frag, el('h3', {}, 'Over time: ' + name));
      append(frag, el('p', { class: 'muted' }, 'Each row a stretch of the run, and in it the bucket (' + duration(h.bucket_ns) +
                                               ', the heap at its end) with the most free bytes in holes.'));
      append(frag, table(['stretch', '#bucket', '#reserved', '#held', '#free in holes', '#largest hole', '#ratio'], rows, { class: 'heap-over-time' }));
    });
  } else {
    append(frag, el('p', { class: 'muted' }, 'No framework heap whose blocks were recorded.'));
  }
  if (data.pools && data.pools.length) {
    append(frag, el('h3', {}, 'Stream-ordered pools (used: exact, from the trace\'s allocations; reserved: sampled; unused = reserved - used)'));
    append(frag, table(['pool', 'kind', 'device', '#peak used', '#used at the end', '#samples', '#peak reserved', '#last reserved', '#most unused'],
      data.pools.map(function (p) {
        return el('tr', {}, el('td', { class: 'frame' }, p.pool), el('td', {}, p.kind), el('td', {}, deviceName(p.device)),
                  numCell(p.peak_used_bytes, bytes(p.peak_used_bytes) + (p.used_from_events ? ' at ' + duration(p.peak_used_time_ns) : ' (sampled)')),
                  numCell(p.last_used_bytes, bytes(p.last_used_bytes)), el('td', { class: 'num' }, p.samples),
                  numCell(p.peak_reserved_bytes, bytes(p.peak_reserved_bytes)), numCell(p.last_reserved_bytes, bytes(p.last_reserved_bytes)),
                  numCell(p.max_unused_bytes, bytes(p.max_unused_bytes) + ' at ' + duration(p.max_unused_time_ns)));
      })));
  }
  // Address gaps between the driver's allocations: layout, not fragmentation (the driver maps pages anywhere).
  var fragRows = [];
  data.fragmentation.forEach(function (d) {
    [['at its peak', d.at_peak], ['at the end', d.at_end]].forEach(function (m) {
      if (!m[1]) return;
      fragRows.push(el('tr', {}, el('td', {}, deviceName(d.device) + ' ' + m[0]), el('td', { class: 'num' }, duration(m[1].time_ns)),
                       el('td', { class: 'num' }, m[1].allocations), numCell(m[1].span_bytes, bytes(m[1].span_bytes)),
                       numCell(m[1].free_bytes, bytes(m[1].free_bytes)),
                       numCell(m[1].largest_gap_bytes, bytes(m[1].largest_gap_bytes)), el('td', { class: 'num' }, m[1].ratio.toFixed(2))));
    });
  });
  if (fragRows.length) {
    append(frag, el('h3', {}, 'Address-space layout of device allocations'));
    append(frag, el('p', { class: 'muted' }, 'Virtual-address gaps between live driver allocations. Not fragmentation: the driver maps physical pages anywhere, so these gaps do not say whether the next cudaMalloc fits.'));
    append(frag, table(['moment', '#time', '#allocations', '#span', '#gaps', '#largest gap', '#ratio'], fragRows));
  }

  // ---- failures ----
  var fail = section('Failed allocations', 'failures');
  if (!data.totals.failed_allocations) append(fail, el('p', { class: 'muted' }, 'None.'));
  if (data.failures.length) {
    append(fail, table(['#time', 'device', '#requested', '#device free', 'error', 'label', 'called at'], data.failures.map(function (f) {
      return el('tr', { 'class': 'failure' }, el('td', { class: 'num' }, duration(f.time_ns)), el('td', {}, deviceName(f.device)),
                numCell(f.requested_bytes, bytes(f.requested_bytes)),
                el('td', { class: 'num' }, f.device_free === null ? 'not recorded' : bytes(f.device_free)),
                el('td', {}, f.error_name), el('td', {}, f.label), stackCell(f));
    })));
  }
  if (data.failures_not_shown) append(fail, el('p', { class: 'muted' }, data.failures_not_shown + ' more failed allocations are not shown.'));

  // ---- the framework allocator's own statistics and PyTorch's OOMs ----
  if (allocatorDevices.length) {
    var alloc = section('Framework allocator statistics', 'allocator-stats');
    append(alloc, table(['device', 'allocator', '#samples', '#peak reserved', '#peak in use', '#peak inactive split', '#retries',
                         '#OOMs', '#cached at the end'], allocatorDevices.map(function (a) {
      return el('tr', { 'class': 'allocator-device' }, el('td', {}, deviceName(a.device)), el('td', {}, a.allocator_name),
                el('td', { class: 'num' }, a.samples), numCell(a.peak_reserved_bytes, bytes(a.peak_reserved_bytes)),
                numCell(a.peak_in_use_bytes, bytes(a.peak_in_use_bytes)),
                a.peak_inactive_split_bytes === null ? el('td', { class: 'num' }, '-') : numCell(a.peak_inactive_split_bytes, bytes(a.peak_inactive_split_bytes)),
                el('td', { class: 'num' }, a.alloc_retries === null ? '-' : a.alloc_retries),
                el('td', { class: 'num' }, a.ooms === null ? '-' : a.ooms), numCell(a.cached_at_end_bytes, bytes(a.cached_at_end_bytes)));
    })));
    allocatorDevices.forEach(function (a) {
      if (a.cached_at_end_bytes) append(alloc, el('p', {}, deviceName(a.device) + ': ' + bytes(a.cached_at_end_bytes) + ' reserved but not in use at the end is ' + a.cache + '.'));
      if (a.advice) append(alloc, el('p', { 'class': 'allocator-advice warning' }, deviceName(a.device) + ': ' + a.advice));
    });
    var ooms = data.allocator_stats.ooms;
    if (ooms.length) {
      append(alloc, el('h3', {}, 'PyTorch out of memory'));
      append(alloc, table(['#time', 'device', '#request', '#in use', '#reserved', '#inactive split', '#device free', '#CUDA-level live'],
        ooms.map(function (o) {
          return el('tr', { 'class': 'allocator-oom' }, el('td', { class: 'num' }, duration(o.time_ns)), el('td', {}, deviceName(o.device)),
                    numCell(o.request_bytes, bytes(o.request_bytes)), numCell(o.in_use_bytes, bytes(o.in_use_bytes)),
                    numCell(o.reserved_bytes, bytes(o.reserved_bytes)),
                    el('td', { class: 'num' }, o.inactive_split_bytes === null ? '-' : bytes(o.inactive_split_bytes)),
                    el('td', { class: 'num' }, o.device_free === null ? 'not recorded' : bytes(o.device_free)),
                    numCell(o.cuda_live_bytes, bytes(o.cuda_live_bytes)));
        })));
      ooms.forEach(function (o) {
        if (!o.top_stacks.length) return;
        append(alloc, el('p', { class: 'muted' }, 'CUDA-level memory live on ' + deviceName(o.device) + ' at the OOM of ' + duration(o.time_ns) + ':'));
        append(alloc, table(['#bytes', '#allocations', 'allocated at'], o.top_stacks.map(function (h) {
          return el('tr', {}, numCell(h.bytes, bytes(h.bytes)), el('td', { class: 'num' }, h.count), stackCell(h));
        })));
      });
    }
  }

  if (ranges.length) {
    var nvtx = section('NVTX ranges', 'ranges');
    append(nvtx, el('p', { class: 'muted' }, ranges.length + ' ranges, drawn as bands behind the timeline' +
                                             (data.range_spans_not_shown ? '; ' + data.range_spans_not_shown + ' more are not shown' : '') + '.'));
  }

  document.body.setAttribute('data-rendered', 'true');
  // Milliseconds from the start of navigation to here (the page parsed, every plot and table built): what
  // bench/html_report.py reports as the render time.
  document.body.setAttribute('data-render-ms', String(Math.round(performance.now())));
})();
</script>
</body>
</html>
)GMTHTML";
  return kPage;
}

}  // namespace gmt::analysis
