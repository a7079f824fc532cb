"use strict";
(function () {
  var STATES = ["building", "testing", "ready", "in-use", "used", "hold", "deleting", "failed",
    "init", "aborted", "deleted", "uploading", "unknown"];
  var PHASES = ["quota_wait", "create", "boot", "keyscan", "total"];
  var REFRESH_MS = 5000;
  function esc(s) {
    return String(s == null ? "" : s).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c];
    });
  }
  function flink(f, provider, label, text) {
    var p = provider == null ? f.provider : provider, l = label == null ? f.label : label, q = [];
    if (p) q.push("provider=" + encodeURIComponent(p));
    if (l) q.push("label=" + encodeURIComponent(l));
    return '<a class="flt" href="?' + esc(q.join("&")) + '">' + esc(text) + "</a>";
  }
  function age(s) {
    if (s < 0) return "-";
    if (s < 120) return s.toFixed(0) + " s";
    if (s < 7200) return (s / 60).toFixed(0) + " min";
    if (s < 172800) return (s / 3600).toFixed(1) + " h";
    return (s / 86400).toFixed(1) + " d";
  }
  function providers(s) {
    var h = '<h2>Providers and pools</h2><table><thead><tr><th>Provider</th><th>Driver</th>' +
      '<th>State</th><th>Pool</th><th>Labels</th><th>Launchers</th><th class="num">Nodes</th>' +
      "</tr></thead><tbody>";
    s.providers.forEach(function (p) {
      var pools = p.pools.length ? p.pools : [{name: "", labels: [], launchers: []}];
      var n = pools.length, last = typeof p.starts === "number" ? "starts: " + p.starts : "";
      pools.forEach(function (pl, j) {
        h += "<tr>";
        if (j === 0)
          h += '<td rowspan="' + n + '">' + flink(s.filter, p.name, null, p.name) + "</td>" +
            '<td rowspan="' + n + '">' + esc(p.driver) + "</td>" +
            '<td rowspan="' + n + '"><span class="st st-' + esc(p.state) +
            '" data-k="prov-state:' + esc(p.name) + '">' + esc(p.state) + "</span><small>" +
            esc(last) + "</small></td>";
        h += "<td>" + esc(pl.name) + "</td><td>" + pl.labels.map(function (l) {
          return flink(s.filter, null, l, l);
        }).join(" ") + "</td><td>";
        pl.launchers.forEach(function (la) {
          var id = la.id || "";
          h += '<div class="lc"><span class="st st-' + esc(la.state) + '">' + esc(la.state) +
            "</span> <code>" + esc(la.hostname) + '</code> <small class="lcid" title="' +
            esc(id) + '">' + esc(id.slice(-8)) + "</small>" +
            (la.nodepoold === null ? " <small>Nodepool</small>" : "") + "</div>";
        });
        if (!pl.launchers.length) h += '<span class="muted">none registered</span>';
        h += "</td>";
        if (j === 0)
          h += '<td class="num" rowspan="' + n + '" data-k="prov-total:' + esc(p.name) + '">' +
            p.total + "</td>";
        h += "</tr>";
      });
    });
    return h + "</tbody></table>";
  }
  function chart(hist) {
    var W = 1000, H = 200, L = 44, B = 18, samples = hist.samples || [];
    if (samples.length < 1) return '<p class="muted">no samples yet</p>';
    var used = STATES.filter(function (st) {
      return samples.some(function (x) { return x.by_state[st]; });
    });
    var t1 = samples[samples.length - 1].t, t0 = Math.min(samples[0].t, t1 - 60);
    var max = 1;
    samples.forEach(function (x) {
      var sum = 0;
      used.forEach(function (st) { sum += x.by_state[st] || 0; });
      if (sum > max) max = sum;
    });
    function X(t) { return L + (W - L - 4) * (t - t0) / ((t1 - t0) || 1); }
    function Y(v) { return H - B - (H - B - 6) * v / max; }
    var base = samples.map(function () { return 0; }), out = "";
    used.forEach(function (st) {
      var top = samples.map(function (x, i) { return base[i] + (x.by_state[st] || 0); });
      var pts = samples.map(function (x, i) { return X(x.t).toFixed(1) + "," + Y(top[i]).toFixed(1); });
      var back = samples.map(function (x, i) {
        return X(x.t).toFixed(1) + "," + Y(base[i]).toFixed(1);
      }).reverse();
      if (samples.length === 1) {
        pts.unshift(X(t0).toFixed(1) + "," + Y(top[0]).toFixed(1));
        back.push(X(t0).toFixed(1) + "," + Y(base[0]).toFixed(1));
      }
      out += '<polygon style="fill:var(--' + st + ')" points="' + pts.concat(back).join(" ") +
        '"><title>' + st + "</title></polygon>";
      base = top;
    });
    var ax = '<line x1="' + L + '" y1="' + (H - B) + '" x2="' + W + '" y2="' + (H - B) +
      '" stroke="#ccd"/>';
    [0, 0.5, 1].forEach(function (f) {
      var v = Math.round(max * f);
      ax += '<text x="' + (L - 4) + '" y="' + (Y(v) + 3) + '" text-anchor="end">' + v + "</text>";
    });
    [t0, (t0 + t1) / 2, t1].forEach(function (t, i) {
      var d = new Date(t * 1000);
      ax += '<text x="' + X(t) + '" y="' + (H - 4) + '" text-anchor="' +
        ["start", "middle", "end"][i] + '">' + d.toTimeString().slice(0, 5) + "</text>";
    });
    var legend = used.map(function (st) {
      return '<span class="sw sw-' + st + '"></span>' + st;
    }).join(" &nbsp;");
    return '<svg viewBox="0 0 ' + W + " " + H + '" preserveAspectRatio="none">' + out + ax +
      "</svg><div class=\"muted\">" + legend + " &nbsp; (last hour, a sample every " +
      hist.interval + " s)</div>";
  }
  function nodes(s) {
    var n = s.nodes, cols = STATES.filter(function (st) { return st in n.by_state; });
    var h = '<h2>Nodes by state and label</h2><div id="chart" class="chart">' +
      chart(s.history) + '</div><p class="big"><span data-k="nodes-total">' + n.total +
      "</span> nodes</p><table><thead><tr><th>Label</th>";
    cols.forEach(function (st) {
      h += '<th class="num"><span class="sw sw-' + st + '"></span>' + st + "</th>";
    });
    h += "</tr></thead><tbody>";
    Object.keys(n.by_label).forEach(function (l) {
      h += "<tr><td>" + flink(s.filter, null, l, l) + "</td>";
      cols.forEach(function (st) {
        h += '<td class="num" data-k="label-state:' + esc(l) + "|" + st + '">' +
          (n.by_label[l][st] || 0) + "</td>";
      });
      h += "</tr>";
    });
    h += '<tr class="tot"><td>all nodes</td>';
    cols.forEach(function (st) {
      h += '<td class="num" data-k="state:' + st + '">' + n.by_state[st] + "</td>";
    });
    return h + "</tr></tbody></table>";
  }
  function quota(s) {
    var h = '<h2>Quota use</h2><table><thead><tr><th>Provider</th><th>Pool</th>' +
      '<th>Resource</th><th class="bar">Use</th><th class="num">Used</th>' +
      '<th class="num">Limit</th></tr></thead><tbody>';
    s.quota.forEach(function (q) {
      var lim = q.limit, pct = typeof lim === "number" && lim > 0 ? 100 * q.used / lim : 0;
      if (pct > 100) pct = 100;
      h += "<tr><td>" + esc(q.provider) + "</td><td>" + esc(q.pool || "(provider)") +
        "</td><td>" + esc(q.resource) + '</td><td class="bar"><div class="bar' +
        (pct >= 90 ? " hot" : "") + '"><i style="width:' + pct.toFixed(1) + '%"></i></div></td>' +
        '<td class="num" data-k="quota:' + esc(q.provider) + "|" + esc(q.pool || "") + "|" +
        esc(q.resource) + '">' + q.used + '</td><td class="num">' +
        (typeof lim === "number" ? lim : "&infin;") + "</td></tr>";
    });
    s.tenants.forEach(function (t) {
      h += '<tr><td colspan="2">tenant ' + esc(t.tenant) + "</td><td>" + esc(t.resource) +
        '</td><td class="bar muted">limit (usage by tenant is Zuul\'s)</td>' +
        '<td class="num">-</td><td class="num">' + esc(t.limit) + "</td></tr>";
    });
    return h + "</tbody></table>";
  }
  function requests(s) {
    var r = s.requests, h = '<h2>Requests waiting</h2><p class="big"><span data-k="req-waiting">' +
      r.waiting + '</span> waiting</p><table><thead><tr><th>Age</th><th class="num">Requests' +
      "</th></tr></thead><tbody>";
    r.by_age.forEach(function (a, i) {
      h += "<tr><td>" + esc(a.label) + '</td><td class="num" data-k="req-age:' + i + '">' + a.n +
        "</td></tr>";
    });
    h += "</tbody></table><h3>Oldest</h3><table><thead><tr><th>Request</th><th>State</th>" +
      '<th>Labels</th><th>Requestor</th><th class="num">Age</th></tr></thead><tbody>';
    r.oldest.forEach(function (a) {
      h += "<tr><td><code>" + esc(a.id) + "</code></td><td>" + esc(a.state) + "</td><td>" +
        a.node_types.map(esc).join(" ") + "</td><td>" + esc(a.requestor) +
        '</td><td class="num">' + age(a.age) + "</td></tr>";
    });
    return h + "</tbody></table>";
  }
  function phases(s) {
    var h = "<h2>Launch phases <small>bucket upper bounds in seconds (m: minutes, h: " +
      'hours)</small></h2><div class="hists">';
    PHASES.forEach(function (name) {
      var p = s.phases[name];
      if (!p) return;
      var max = Math.max.apply(null, [1].concat(p.buckets));
      h += '<div class="hist"><h3>' + name + '</h3><p><span data-k="phase-count:' + name + '">' +
        p.count + "</span> launches" + (p.count > 0 ? ", mean " + (p.sum / p.count).toFixed(2) +
        " s" : "") + '</p><div class="cols">';
      p.buckets.forEach(function (n, i) {
        var b = p.bounds[i], le = i >= p.bounds.length ? "more" : b < 60 ? String(b) :
          b < 3600 ? b / 60 + "m" : b / 3600 + "h";
        h += '<div class="col" title="up to ' + le + ": " + n + '"><span class="n" data-k="phase:' +
          name + "|" + i + '">' + n + '</span><div class="c"><i style="height:' +
          (100 * n / max).toFixed(1) + '%"></i></div><span class="le">' + le + "</span></div>";
      });
      h += "</div></div>";
    });
    return h + "</div>";
  }
  function images(s) {
    var h = "<h2>Diskimages</h2><table><thead><tr><th>Image</th><th>Builds</th><th>Uploads</th>" +
      "</tr></thead><tbody>";
    s.images.forEach(function (img) {
      h += "<tr><td>" + esc(img.image) + '<br><small><span data-k="image-builds:' +
        esc(img.image) + '">' + img.builds.length + '</span> builds, <span data-k="image-uploads:' +
        esc(img.image) + '">' + img.uploads.length + "</span> uploads</small></td><td>";
      img.builds.forEach(function (x) {
        h += "<div><code>" + esc(x.id) + '</code> <span class="st st-' + esc(x.state) + '">' +
          esc(x.state) + "</span> <small>" + (typeof x.age === "number" ? age(x.age) : "-") + "</small></div>";
      });
      h += "</td><td>";
      img.uploads.forEach(function (x) {
        h += "<div>" + esc(x.provider) + " <code>" + esc(x.build) + "/" + esc(x.id) +
          '</code> <span class="st st-' + esc(x.state) + '">' + esc(x.state) +
          "</span> <small>" + (typeof x.age === "number" ? age(x.age) : "-") + "</small></div>";
      });
      h += "</td></tr>";
    });
    if (!s.images.length) h += '<tr><td colspan="3" class="muted">no diskimages</td></tr>';
    return h + "</tbody></table>";
  }
  function held(s) {
    var h = '<h2>Held nodes (<span data-k="held-count">' + s.held_total + "</span>)</h2>" +
      "<table><thead><tr><th>Node</th><th>Provider</th><th>Label</th><th>Job</th>" +
      '<th>Comment</th><th class="num">Held for</th><th class="num">Expires in</th></tr>' +
      "</thead><tbody>";
    s.held.forEach(function (x) {
      h += "<tr><td><code>" + esc(x.id) + "</code></td><td>" + esc(x.provider) + "</td><td>" +
        x.label.map(esc).join(" ") + "</td><td>" + esc(x.hold_job) + "</td><td>" +
        esc(x.comment) + '</td><td class="num">' + age(x.age) + '</td><td class="num">' +
        (typeof x.expires_in === "number" ? age(x.expires_in) : "never") + "</td></tr>";
    });
    if (!s.held.length) h += '<tr><td colspan="7" class="muted">no held nodes</td></tr>';
    else if (s.held_total > s.held.length)
      h += '<tr><td colspan="7" class="muted">the ' + s.held.length + " soonest to expire " +
        "shown; <code>nodepool list</code> has them all</td></tr>";
    return h + "</tbody></table>";
  }
  var PANELS = {providers: providers, nodes: nodes, quota: quota, requests: requests,
    phases: phases, images: images, held: held};
  function draw(s) {
    var t0 = performance.now();
    Object.keys(PANELS).forEach(function (id) {
      var el = document.getElementById(id);
      if (el) el.innerHTML = PANELS[id](s);
    });
    var upd = document.getElementById("upd");
    upd.textContent = "updated " + new Date(s.generated * 1000).toLocaleTimeString();
    upd.className = "";
    document.body.setAttribute("data-generated", String(s.generated));
    window.npRenderMs = performance.now() - t0;
    performance.mark("np-drawn");
  }
  function refresh() {
    var x = new XMLHttpRequest();
    x.open("GET", "status-summary" + location.search);
    x.setRequestHeader("Accept", "application/json");
    x.onload = function () {
      if (x.status === 200) {
        try { draw(JSON.parse(x.responseText)); } catch (e) { setStale("bad answer"); }
      } else {
        setStale("server answered " + x.status);
      }
      setTimeout(refresh, REFRESH_MS);
    };
    x.onerror = function () { setStale("server unreachable"); setTimeout(refresh, REFRESH_MS); };
    x.send();
  }
  function setStale(why) {
    var upd = document.getElementById("upd");
    upd.textContent = "stale: " + why;
    upd.className = "st st-down";
  }
  // the server drew the tables; the chart is the script's
  var t0 = performance.now(), chartEl = document.getElementById("chart");
  if (chartEl) chartEl.innerHTML = chart(JSON.parse(document.getElementById("history").textContent));
  window.npRenderMs = performance.now() - t0;
  document.body.setAttribute("data-generated", "0");
  setTimeout(refresh, REFRESH_MS);
})();
