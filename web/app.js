// Surge dashboard: the hot list, one topic's detail and the pipeline health, kept live over
// server-sent events (/v1/trends/stream). Charts are drawn with d3 (Debian's libjs-d3, v3 API),
// served by the same process as /lib/d3.min.js. Text from the data is only ever set through
// textContent.
(function () {
  'use strict';

  var state = {
    list: null,        // last hot list (HotListJson)
    health: null,      // last health (HealthJson)
    selected: null,    // topic id shown in the detail panel
    events: 0,         // hot lists received
    source: null,      // the EventSource
    retryMs: 1000,     // manual reconnect back-off when the browser gave up
    detailSeq: 0,      // guards against out-of-order detail responses
  };
  var hasD3 = typeof window.d3 !== 'undefined';
  var categoryColor = hasD3 ? d3.scale.category10() : function () { return '#6b7280'; };

  function $(id) { return document.getElementById(id); }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function pad(n) { return n < 10 ? '0' + n : String(n); }

  function clock(ms) {
    var d = new Date(ms);
    return pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }

  function dateTime(ms) {
    var d = new Date(ms);
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + clock(ms);
  }

  function compact(n) {
    if (n === null || n === undefined || isNaN(n)) return '—';
    var a = Math.abs(n);
    if (a >= 1e9) return (n / 1e9).toFixed(1) + 'G';
    if (a >= 1e6) return (n / 1e6).toFixed(1) + 'M';
    if (a >= 1e4) return (n / 1e3).toFixed(1) + 'k';
    if (a >= 100) return Math.round(n).toString();
    return (Math.round(n * 10) / 10).toString();
  }

  function duration(ms) {
    if (ms < 1000) return Math.round(ms) + ' ms';
    if (ms < 120000) return (ms / 1000).toFixed(1) + ' s';
    return (ms / 60000).toFixed(1) + ' min';
  }

  function notice(text) {
    var n = $('notice');
    n.textContent = text;
    n.hidden = !text;
  }

  // ---- charts (d3) ----

  function sparkline(cell, values) {
    if (!hasD3) return;
    var w = 120, h = 28;
    var svg = d3.select(cell).append('svg').attr('class', 'spark').attr('width', w).attr('height', h);
    var known = values.filter(function (v) { return v !== null; });
    var lo = d3.min(known), hi = d3.max(known);
    if (lo === undefined) { lo = 0; hi = 1; }
    var span = hi - lo || Math.abs(hi) || 1;
    var x = d3.scale.linear().domain([0, Math.max(1, values.length - 1)]).range([2, w - 2]);
    // The row's own range, so the shape shows; the heat number beside it gives the level.
    var y = d3.scale.linear().domain([lo - 0.15 * span, hi + 0.05 * span]).range([h - 2, 3]);
    var defined = function (v) { return v !== null; };
    svg.append('path').attr('class', 'spark-area').attr('d', d3.svg.area()
        .defined(defined).x(function (v, i) { return x(i); }).y0(h - 2)
        .y1(function (v) { return y(v); })(values));
    svg.append('path').attr('class', 'spark-line').attr('d', d3.svg.line()
        .defined(defined).x(function (v, i) { return x(i); })
        .y(function (v) { return y(v); })(values));
    var last = values.length - 1;
    if (last >= 0 && values[last] !== null) {
      svg.append('circle').attr('class', 'spark-dot').attr('r', 2.2)
          .attr('cx', x(last)).attr('cy', y(values[last]));
    }
  }

  function sentimentBar(cell, s) {
    var total = (s.pos + s.neu + s.neg) || 1;
    var parts = [['pos', s.pos / total], ['neu', s.neu / total], ['neg', s.neg / total]];
    var title = 'positive ' + Math.round(100 * s.pos / total) + '%, neutral ' +
        Math.round(100 * s.neu / total) + '%, negative ' + Math.round(100 * s.neg / total) + '%';
    cell.title = title;
    if (!hasD3) {
      cell.textContent = Math.round(100 * s.pos / total) + '/' + Math.round(100 * s.neu / total) +
          '/' + Math.round(100 * s.neg / total);
      return;
    }
    var w = 96, h = 10;
    var x = d3.scale.linear().domain([0, 1]).range([0, w]);
    var svg = d3.select(cell).append('svg').attr('class', 'senti').attr('width', w).attr('height', h);
    var offset = 0;
    parts.forEach(function (p) {
      svg.append('rect').attr('class', 'senti-' + p[0]).attr('x', x(offset)).attr('y', 0)
          .attr('width', Math.max(0, x(p[1]))).attr('height', h);
      offset += p[1];
    });
    var label = el('span', 'senti-label');
    label.appendChild(el('span', 'senti-pos-text', '+' + Math.round(100 * s.pos / total)));
    label.appendChild(el('span', 'senti-neg-text', ' −' + Math.round(100 * s.neg / total)));
    cell.appendChild(label);
  }

  function heatChart(container, history) {
    container.textContent = '';
    if (!hasD3) {
      container.appendChild(el('p', 'muted', 'heat chart needs the charting library (libjs-d3)'));
      return;
    }
    if (!history.length) {
      container.appendChild(el('p', 'muted', 'no heat history yet'));
      return;
    }
    var w = Math.max(280, container.clientWidth || 420), h = 190;
    var m = {top: 12, right: 14, bottom: 26, left: 52};
    var svg = d3.select(container).append('svg').attr('class', 'heat').attr('width', w).attr('height', h);
    var g = svg.append('g').attr('transform', 'translate(' + m.left + ',' + m.top + ')');
    var iw = w - m.left - m.right, ih = h - m.top - m.bottom;
    var t0 = history[0].bucket, t1 = history[history.length - 1].bucket;
    if (t0 === t1) { t0 -= 60000; }
    var x = d3.time.scale().domain([new Date(t0), new Date(t1)]).range([0, iw]);
    var y = d3.scale.linear().domain([0, (d3.max(history, function (p) { return p.heat; }) || 1) * 1.1])
        .range([ih, 0]).nice();
    g.append('g').attr('class', 'axis').attr('transform', 'translate(0,' + ih + ')')
        .call(d3.svg.axis().scale(x).orient('bottom').ticks(5));
    g.append('g').attr('class', 'axis')
        .call(d3.svg.axis().scale(y).orient('left').ticks(5).tickFormat(d3.format('.2s')));
    var px = function (p) { return x(new Date(p.bucket)); };
    var py = function (p) { return y(p.heat); };
    g.append('path').attr('class', 'heat-area')
        .attr('d', d3.svg.area().x(px).y0(ih).y1(py)(history));
    g.append('path').attr('class', 'heat-line').attr('d', d3.svg.line().x(px).y(py)(history));
    g.selectAll('circle').data(history).enter().append('circle').attr('class', 'heat-dot')
        .attr('r', 2.5).attr('cx', px).attr('cy', py)
        .append('title').text(function (p) {
          return clock(p.bucket) + '  heat ' + compact(p.heat) + '  rank ' + p.rank;
        });
  }

  // ---- hot list ----

  function moveCell(t) {
    if (t.prev_rank === null || t.prev_rank === undefined) return el('span', 'move new', 'NEW');
    var d = t.prev_rank - t.rank;
    if (d > 0) return el('span', 'move up', '↑' + d);
    if (d < 0) return el('span', 'move down', '↓' + (-d));
    return el('span', 'move same', '–');
  }

  function renderList(list) {
    state.list = list;
    state.events += 1;
    document.body.dataset.seq = list.seq;
    document.body.dataset.events = state.events;
    $('bucket').textContent = list.bucket ? dateTime(list.bucket) : '—';
    $('count').textContent = list.trends.length ? list.trends.length + ' topics' : '';
    $('empty').hidden = list.trends.length > 0;
    if (list.bucket && list.trends.length === 0) $('empty').textContent = 'No trending topics in this bucket.';
    var tbody = document.querySelector('#hot tbody');
    var rows = document.createDocumentFragment();
    list.trends.forEach(function (t) {
      var tr = el('tr');
      tr.dataset.topic = t.topic_id;
      if (t.topic_id === state.selected) tr.classList.add('selected');
      if (t.prev_rank === null || t.prev_rank > t.rank) tr.classList.add('rising');
      tr.appendChild(el('td', 'num rank', t.rank));
      var mv = el('td');
      mv.appendChild(moveCell(t));
      tr.appendChild(mv);
      var topic = el('td', 'topic');
      topic.appendChild(el('div', 'hashtag', t.hashtag || t.topic_id));
      topic.appendChild(el('div', 'terms-inline', (t.terms || []).join(' · ')));
      tr.appendChild(topic);
      tr.appendChild(el('td', 'num heat-num', compact(t.heat)));
      var sp = el('td', 'spark-cell');
      sparkline(sp, (list.spark && list.spark[t.topic_id]) || [t.heat]);
      tr.appendChild(sp);
      var cat = el('td');
      var chip = el('span', 'chip', t.category || '—');
      chip.style.borderColor = categoryColor(t.category || '');
      chip.style.color = categoryColor(t.category || '');
      cat.appendChild(chip);
      tr.appendChild(cat);
      var se = el('td', 'senti-cell');
      sentimentBar(se, t.sentiment || {pos: 0, neu: 1, neg: 0});
      tr.appendChild(se);
      tr.appendChild(el('td', 'num', compact(t.posts)));
      tr.appendChild(el('td', 'num', compact(t.authors)));
      tr.addEventListener('click', function () { select(t.topic_id); });
      rows.appendChild(tr);
    });
    tbody.textContent = '';
    tbody.appendChild(rows);
    document.body.dataset.rows = list.trends.length;
    if (!state.selected && list.trends.length) {
      select(list.trends[0].topic_id);
    } else if (state.selected) {
      loadDetail(state.selected);
    }
    tickAge();
  }

  function tickAge() {
    var l = state.list;
    $('age').textContent = l && l.updated ? '(' + duration(Math.max(0, Date.now() - l.updated)) + ' ago)' : '';
  }

  // ---- detail ----

  function select(id) {
    state.selected = id;
    var rows = document.querySelectorAll('#hot tbody tr');
    for (var i = 0; i < rows.length; i++) {
      rows[i].classList.toggle('selected', rows[i].dataset.topic === id);
    }
    loadDetail(id);
  }

  function loadDetail(id) {
    var seq = ++state.detailSeq;
    fetch('/v1/topics/' + encodeURIComponent(id)).then(function (r) {
      return r.json().then(function (body) { return {ok: r.ok, body: body}; });
    }).then(function (res) {
      if (seq !== state.detailSeq) return;
      if (!res.ok) {
        $('d-title').textContent = id;
        $('d-meta').textContent = res.body.error || 'not available';
        return;
      }
      renderDetail(res.body);
    }).catch(function (e) {
      if (seq === state.detailSeq) $('d-meta').textContent = 'cannot load topic: ' + e;
    });
  }

  function renderDetail(d) {
    var t = d.latest || {};
    $('d-title').textContent = t.hashtag || d.topic_id;
    var meta = $('d-meta');
    meta.textContent = '';
    var items = [
      ['rank', d.on_list ? '#' + t.rank : 'off the list'],
      ['heat', compact(t.heat)],
      ['category', t.category || '—'],
      ['posts', compact(t.posts)],
      ['authors', compact(t.authors)],
      ['first seen', t.first_seen ? dateTime(t.first_seen) : '—'],
    ];
    items.forEach(function (it) {
      var m = el('span', 'kv');
      m.appendChild(el('span', 'k', it[0]));
      m.appendChild(el('span', 'v', it[1]));
      meta.appendChild(m);
    });
    heatChart($('d-chart'), d.history || []);
    var terms = $('d-terms');
    terms.textContent = '';
    (t.terms || []).forEach(function (term) { terms.appendChild(el('span', 'term', term)); });
    var ul = $('d-samples');
    ul.textContent = '';
    var samples = d.samples || [];
    if (!samples.length) {
      var ids = (t.samples || []).join(', ');
      ul.appendChild(el('li', 'muted', ids ? 'post ids: ' + ids + ' (texts not available)' : 'no sample posts'));
    }
    samples.forEach(function (p) {
      var li = el('li');
      var head = el('div', 'sample-head');
      head.appendChild(el('span', 'user', '@' + (p.user || 'unknown')));
      head.appendChild(el('span', 'muted', p.ts ? dateTime(p.ts) : ''));
      li.appendChild(head);
      li.appendChild(el('div', 'sample-text', p.text));
      ul.appendChild(li);
    });
  }

  // ---- health ----

  function renderHealth(h) {
    state.health = h;
    var has = h.updated > 0;
    var live = has && h.live !== false;  // a replayed file has no rates, lag or latency
    $('h-rate').textContent = live ? compact(h.posts_per_s) : '—';
    $('h-lag').textContent = live ? duration(h.lag_ms) : '—';
    $('h-p99').textContent = live && h.inference_p99_ms > 0 ? h.inference_p99_ms.toFixed(1) + ' ms' : '—';
    var dead = $('h-dead');
    dead.textContent = has ? compact(h.dead_letters) : '—';
    var kinds = Object.keys(h.dead_letter_kinds || {}).map(function (k) {
      return k + ': ' + h.dead_letter_kinds[k];
    });
    dead.title = kinds.join(', ');
    dead.classList.toggle('warn', h.dead_letters > 0);
    $('h-buckets').textContent = has ? compact(h.buckets) : '—';
    $('h-posts').textContent = live ? compact(h.posts_total) : '—';
    $('h-model').textContent = has ? (h.model || 'lexical only') + (h.backend ? ' (' + h.backend + ')' : '') : '—';
    $('h-source').textContent = has ? (h.source || '—') : '—';
  }

  // ---- live updates ----

  function setConn(cls, text) {
    var c = $('conn');
    c.className = 'conn ' + cls;
    c.textContent = text;
    document.body.dataset.conn = cls;
  }

  function connect() {
    if (state.source) state.source.close();
    var es = new EventSource('/v1/trends/stream');
    state.source = es;
    es.onopen = function () {
      state.retryMs = 1000;
      setConn('live', 'live');
    };
    es.addEventListener('trends', function (e) {
      try {
        renderList(JSON.parse(e.data));
      } catch (err) {
        notice('cannot show a hot list update: ' + err);
      }
    });
    es.addEventListener('health', function (e) {
      try {
        renderHealth(JSON.parse(e.data));
      } catch (err) {
        notice('cannot show the pipeline health: ' + err);
      }
    });
    es.onerror = function () {
      if (es.readyState === EventSource.CLOSED) {
        // The browser gave up (e.g. the server refused the stream): retry with back-off.
        setConn('down', 'disconnected, retrying in ' + Math.round(state.retryMs / 1000) + ' s');
        setTimeout(connect, state.retryMs);
        state.retryMs = Math.min(30000, state.retryMs * 2);
      } else {
        setConn('connecting', 'reconnecting…');
      }
    };
  }

  function start() {
    if (!hasD3) {
      notice('The charting library did not load (/lib/d3.min.js). Install the Debian package ' +
          'libjs-d3 (scripts/setup does) and restart; the tables work without it.');
    }
    window.addEventListener('resize', function () {
      if (state.selected) loadDetail(state.selected);
    });
    setInterval(tickAge, 1000);
    // The first view without waiting for the stream.
    fetch('/v1/health').then(function (r) { return r.json(); }).then(renderHealth).catch(function () {});
    connect();
  }

  window.surgeDashboard = {state: state, hasD3: hasD3};
  start();
})();
