/* pytest-agentgym runs index: filters, sorting by column, picking runs.
 *
 * The table is rendered by index_table.html.j2; each row carries what is filtered on
 * (data-model, data-node, data-status, data-search) and each cell what it sorts by
 * (data-sort). Picking runs (checkboxes) gives, on the live page of `pytest-agentgym
 * view` (body data-live="yes"), links to its compare view (exactly two runs: the one
 * started first is the base) and trend page (two or more); on the static
 * reports/index.html, the shell command to run. The live page fetches the table
 * again every few seconds (/api/index) and keeps filters, sort and picks.
 * Everything taken from data is written with textContent or as attribute values.
 */
(function () {
  "use strict";

  var live = document.body.getAttribute("data-live") === "yes";
  var box = document.getElementById("runs-table-box");
  var fields = ["model", "node", "status"];
  var picked = [];                      // keys, in the order they were picked
  var sort = { column: 6, dir: -1 };    // started, newest first (as rendered)
  var token = null;

  function table() { return document.getElementById("runs-table"); }
  function rows() { return Array.prototype.slice.call(table().querySelectorAll("tbody tr.run")); }
  function control(name) { return document.getElementById("f-" + name); }

  /* ------------------------------------------------------------ filters */

  function fillOptions() {
    // options from the rows themselves, so a refreshed table with new models or nodes can be filtered too
    fields.forEach(function (name) {
      var select = control(name), seen = {};
      Array.prototype.forEach.call(select.options, function (o) { seen[o.value] = true; });
      rows().forEach(function (tr) {
        var value = tr.getAttribute("data-" + name);
        if (value && !seen[value]) {
          seen[value] = true;
          var option = document.createElement("option");
          option.value = value; option.textContent = value;
          select.appendChild(option);
        }
      });
    });
  }

  function applyFilters() {
    var text = control("text").value.trim().toLowerCase(), shown = 0, all = rows();
    all.forEach(function (tr) {
      var ok = fields.every(function (name) {
        var want = control(name).value;
        return !want || tr.getAttribute("data-" + name) === want;
      }) && (!text || tr.getAttribute("data-search").indexOf(text) >= 0);
      tr.hidden = !ok;
      if (ok) shown += 1;
    });
    document.getElementById("shown-count").textContent = shown === all.length ? "" : shown + " of " + all.length + " shown";
    document.getElementById("run-count").textContent = all.length + " run(s)";
  }

  /* ------------------------------------------------------------ sorting */

  function headers() { return Array.prototype.slice.call(table().querySelectorAll("thead th")); }

  function applySort() {
    var th = headers()[sort.column];
    if (!th || !th.hasAttribute("data-type")) return;
    var numeric = th.getAttribute("data-type") === "num", column = sort.column;
    var body = table().querySelector("tbody");
    var list = rows().map(function (tr, position) {
      var cell = tr.children[column], value = cell ? cell.getAttribute("data-sort") || "" : "";
      return { tr: tr, value: numeric ? parseFloat(value) : value.toLowerCase(), position: position };
    });
    list.sort(function (a, b) {
      var x = a.value, y = b.value;
      if (numeric) { x = isNaN(x) ? -Infinity : x; y = isNaN(y) ? -Infinity : y; }
      if (x < y) return -sort.dir;
      if (x > y) return sort.dir;
      return a.position - b.position;
    });
    list.forEach(function (item) { body.appendChild(item.tr); });
    headers().forEach(function (h, i) {
      h.classList.remove("sorted-asc", "sorted-desc");
      if (i === column) h.classList.add(sort.dir > 0 ? "sorted-asc" : "sorted-desc");
    });
  }

  function onHeaderClick(event) {
    var th = event.target.closest("th");
    if (!th || !th.hasAttribute("data-type")) return;
    var column = headers().indexOf(th);
    sort = { column: column, dir: sort.column === column ? -sort.dir : (th.getAttribute("data-type") === "num" ? -1 : 1) };
    applySort();
  }

  /* ------------------------------------------------------------ picking runs */

  function rowOf(key) {
    return rows().filter(function (tr) { return tr.getAttribute("data-key") === key; })[0];
  }

  function byStart(keys) {
    return keys.slice().sort(function (a, b) {
      var x = (rowOf(a) || { getAttribute: function () { return ""; } }).getAttribute("data-started");
      var y = (rowOf(b) || { getAttribute: function () { return ""; } }).getAttribute("data-started");
      return x < y ? -1 : x > y ? 1 : 0;
    });
  }

  function setLink(id, href) {
    var link = document.getElementById(id);
    if (href) {
      link.href = href; link.classList.remove("disabled"); link.removeAttribute("aria-disabled");
    } else {
      link.href = "#"; link.classList.add("disabled"); link.setAttribute("aria-disabled", "true");
    }
  }

  function showPicks() {
    picked = picked.filter(function (key) { return rowOf(key); });  // a run that left the directory
    rows().forEach(function (tr) {
      var on = picked.indexOf(tr.getAttribute("data-key")) >= 0, box = tr.querySelector("input.pick-run");
      tr.classList.toggle("picked", on);
      if (box) box.checked = on;
    });
    var ordered = byStart(picked), words = document.getElementById("picked");
    if (!picked.length) words.textContent = "No run picked.";
    else if (picked.length === 2) words.textContent = "Picked 2: base " + ordered[0] + ", candidate " + ordered[1] + ".";
    else words.textContent = "Picked " + picked.length + ": " + ordered.join(", ") + ".";
    var query = ordered.map(function (key) { return "run=" + encodeURIComponent(key); }).join("&");
    if (live) {
      setLink("open-compare", picked.length === 2 ? "/compare?base=" + encodeURIComponent(ordered[0]) +
        "&candidate=" + encodeURIComponent(ordered[1]) : null);
      setLink("open-trend", picked.length >= 2 ? "/trend?" + query : null);
    } else {
      var command = document.getElementById("pick-command");
      var paths = ordered.map(function (key) { return rowOf(key).getAttribute("data-command-path"); });
      command.textContent = picked.length === 2 ? "pytest-agentgym compare " + paths.join(" ") + "    # or: pytest-agentgym trend " + paths.join(" ") + " --html trend.html"
        : picked.length > 2 ? "pytest-agentgym trend " + paths.join(" ") + " --html trend.html" : "";
      command.classList.toggle("hidden", picked.length < 2);
    }
  }

  function onPick(event) {
    var input = event.target;
    if (!input.classList || !input.classList.contains("pick-run")) return;
    var key = input.value;
    picked = picked.filter(function (k) { return k !== key; });
    if (input.checked) picked.push(key);
    showPicks();
  }

  /* ------------------------------------------------------------ the live page */

  function refresh() {
    var ask = "/api/index" + (token === null ? "" : "?token=" + encodeURIComponent(token));
    fetch(ask, { cache: "no-store" }).then(function (answer) {
      if (!answer.ok) throw new Error("HTTP " + answer.status);
      return answer.json();
    }).then(function (data) {
      var badge = document.getElementById("live-badge");
      badge.textContent = data.running ? "live · " + data.running + " running" : "live";
      if (data.token === token || !data.table) return;
      token = data.token;
      box.innerHTML = data.table;  // rendered by the server from the runs' files (escaped there); sent when changed
      fillOptions(); applySort(); applyFilters(); showPicks();
    }).catch(function (error) {
      document.getElementById("live-badge").textContent = "live (server unreachable: " + error.message + ")";
    }).then(function () { setTimeout(refresh, 2000); });
  }

  box.addEventListener("click", onHeaderClick);
  box.addEventListener("change", onPick);
  fields.forEach(function (name) { control(name).addEventListener("change", applyFilters); });
  control("text").addEventListener("input", applyFilters);
  document.getElementById("filters").addEventListener("submit", function (event) { event.preventDefault(); });
  fillOptions(); applyFilters(); showPicks();
  if (live) refresh();
})();
