/* pytest-agentgym report: episode table (sort, filter, pages) and trajectory view.
 *
 * Data comes from <script type="application/json"> blocks written by render.py:
 * #report-meta, #episode-index (one small object per episode) and the
 * .trajectory-chunk blocks (plain JSON, or gzip + base64 for big runs), which
 * are read only when an episode is opened (through trajectory.js, which also
 * draws the turns). All data is written into the page
 * with textContent; handlers are attached to elements here, never built from data.
 * Opening "#episode=<encoded id>" shows that episode; document.body gets
 * data-trajectory="<id>" once it is drawn (tests and scripts can wait on it).
 */
(function () {
  "use strict";

  var T = AgentgymTrajectory, el = T.el, fmt = T.fmt;  // trajectory.js, inlined before this script
  var meta = JSON.parse(document.getElementById("report-meta").textContent);
  var rows = JSON.parse(document.getElementById("episode-index").textContent);
  var byId = new Map();
  var worstOfTask = new Map();  // "env:task" -> the repeat a grid square opens
  var rank = { error: 0, failed: 1, unsolved: 2, passed: 3 };
  rows.forEach(function (row) {
    // Episode ids are "<run id>:<env>:<task>:r<repeat>"; the index spells out only those that differ.
    if (!row.i) row.i = meta.run_id + ":" + meta.envs[row.e] + ":" + row.t + ":r" + row.r;
    byId.set(row.i, row);
    var key = row.e + ":" + row.t, worst = worstOfTask.get(key);
    if (!worst || rank[row.o] < rank[worst.o]) worstOfTask.set(key, row);
  });
  var F = T.fields(meta.turn_fields);
  var state = { key: null, dir: 1, page: 0, view: rows };

  function fragmentFor(id) { return "#episode=" + encodeURIComponent(id); }

  /* ------------------------------------------------------------ episode table */

  var app = document.getElementById("episode-app");
  var tbody = document.querySelector("#episode-table tbody");
  var envSelect = document.getElementById("f-env");
  var inputs = {
    env: envSelect, outcome: document.getElementById("f-outcome"),
    min: document.getElementById("f-min"), max: document.getElementById("f-max"),
    task: document.getElementById("f-task")
  };
  meta.envs.forEach(function (name, n) {
    var option = el("option", null, name);
    option.value = String(n);
    envSelect.appendChild(option);
  });

  function sortValue(row, key) {
    if (key === "e") return meta.envs[row.e];
    var v = row[key];
    return v === null || v === undefined ? -Infinity : v;
  }

  function applyFilters() {
    var env = inputs.env.value, outcome = inputs.outcome.value;
    var lo = inputs.min.value === "" ? null : Number(inputs.min.value);
    var hi = inputs.max.value === "" ? null : Number(inputs.max.value);
    var task = inputs.task.value.trim();
    var view = rows.filter(function (row) {
      if (env !== "" && String(row.e) !== env) return false;
      if (outcome && row.o !== outcome) return false;
      if (lo !== null && !(row.w !== null && row.w >= lo)) return false;
      if (hi !== null && !(row.w !== null && row.w <= hi)) return false;
      if (task && String(row.t) !== task) return false;
      return true;
    });
    if (state.key) {
      var key = state.key, dir = state.dir;
      view.sort(function (a, b) {
        var x = sortValue(a, key), y = sortValue(b, key);
        return x < y ? -dir : x > y ? dir : 0;
      });
    }
    state.view = view;
    state.page = 0;
    drawPage();
  }

  function drawPage() {
    var size = meta.page_size, view = state.view;
    var pages = Math.max(1, Math.ceil(view.length / size));
    state.page = Math.min(Math.max(state.page, 0), pages - 1);
    var start = state.page * size, fragment = document.createDocumentFragment();
    view.slice(start, start + size).forEach(function (row) {
      var tr = el("tr", "o-" + row.o);
      tr.dataset.id = row.i;
      var first = el("td");
      var link = el("a", null, meta.envs[row.e]);
      link.href = fragmentFor(row.i);
      first.appendChild(link);
      tr.appendChild(first);
      [row.t, row.r].forEach(function (v) { tr.appendChild(el("td", "num", v)); });
      var outcome = el("td");
      outcome.appendChild(el("span", "outcome " + row.o, row.o));
      tr.appendChild(outcome);
      tr.appendChild(el("td", "num", fmt(row.w)));
      tr.appendChild(el("td", "num", row.n));
      tr.appendChild(el("td", null, row.x));
      tr.appendChild(el("td", "num", row.k));
      tr.appendChild(el("td", "num", row.d));
      tr.appendChild(el("td", "num", row.a));
      tr.appendChild(el("td", row.err ? "err" : null, row.err || ""));
      fragment.appendChild(tr);
    });
    tbody.replaceChildren(fragment);
    document.getElementById("page-info").textContent = view.length
      ? "page " + (state.page + 1) + " of " + pages + " (episodes " + (start + 1) + "–" +
        Math.min(start + size, view.length) + ")"
      : "no episode matches";
    document.getElementById("f-count").textContent = view.length + " of " + rows.length + " episodes";
    document.getElementById("page-prev").disabled = state.page === 0;
    document.getElementById("page-next").disabled = state.page >= pages - 1;
  }

  Object.keys(inputs).forEach(function (name) {
    inputs[name].addEventListener("input", applyFilters);
  });
  document.getElementById("episode-filters").addEventListener("submit", function (event) {
    event.preventDefault();
  });
  document.querySelectorAll("#episode-table th[data-key]").forEach(function (th) {
    th.tabIndex = 0;
    function sortBy() {
      var key = th.dataset.key;
      state.dir = state.key === key ? -state.dir : 1;
      state.key = key;
      document.querySelectorAll("#episode-table th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
      applyFilters();
    }
    th.addEventListener("click", sortBy);
    th.addEventListener("keydown", function (event) { if (event.key === "Enter") sortBy(); });
  });
  document.getElementById("page-prev").addEventListener("click", function () { state.page -= 1; drawPage(); });
  document.getElementById("page-next").addEventListener("click", function () { state.page += 1; drawPage(); });
  tbody.addEventListener("click", function (event) {
    var tr = event.target.closest("tr");
    if (tr && tr.dataset.id && event.target.tagName !== "A") location.hash = fragmentFor(tr.dataset.id);
  });

  if (rows.length) app.hidden = false;
  applyFilters();

  document.querySelectorAll("svg.outcome-grid").forEach(function (svg) {
    svg.addEventListener("click", function (event) {
      var cell = event.target.closest("rect[data-t]");
      var row = cell && worstOfTask.get(svg.dataset.env + ":" + cell.dataset.t);
      if (row) location.hash = fragmentFor(row.i);
    });
  });

  /* ------------------------------------------------------------ trajectory view */

  var panel = document.getElementById("trajectory");
  var body = document.getElementById("trajectory-body");
  var title = document.getElementById("trajectory-title");

  function fact(list, label, value) {
    var item = el("div");
    item.appendChild(el("dt", null, label));
    item.appendChild(el("dd", null, value === null || value === undefined || value === "" ? "—" : value));
    list.appendChild(item);
  }

  function drawEpisode(row, record) {
    var content = document.createDocumentFragment();
    var banner = el("div", "banner " + row.o);
    var verdict = { passed: "PASSED", failed: "FAILED", unsolved: "UNSOLVED" }[row.o] || "ERROR";
    banner.textContent = verdict + ": reward " + fmt(row.w) + ", " + (row.s ? "success" : "no success") +
      ", stopped by " + row.x + " after " + row.n + " round(s)";
    content.appendChild(banner);
    if (record.error) content.appendChild(T.errorBox(record.error, "Error", "final"));
    record.retried.forEach(function (error, n) {
      content.appendChild(T.errorBox(error, "Attempt " + (n + 1) + " of " + row.a + " failed and was retried", "retried"));
    });
    var facts = el("dl", "facts");
    fact(facts, "Episode", row.i);
    fact(facts, "Environment", meta.envs[row.e]);
    fact(facts, "Task index", row.t);
    fact(facts, "Repeat", row.r);
    fact(facts, "Duration", fmt(row.d, 2) + " s");
    fact(facts, "Tokens", record.prompt_tokens + " in / " + record.completion_tokens + " out");
    fact(facts, "Minimum reward", fmt(record.min_reward));
    fact(facts, "Score", fmt(record.score));
    fact(facts, "Model", record.model);
    fact(facts, "Checkpoint", record.checkpoint);
    fact(facts, "Node", record.node);
    fact(facts, "Worker", record.worker);
    fact(facts, "Started", record.started_at);
    fact(facts, "pytest id", record.nodeid);
    content.appendChild(facts);
    if (!record.turns.length) content.appendChild(el("p", "empty", "No turn was recorded for this episode."));
    var previous = null;
    record.turns.forEach(function (turn) {
      content.appendChild(T.drawTurn(turn, previous, F));
      previous = turn;
    });
    body.replaceChildren(content);
  }

  function showEpisode(id) {
    var row = byId.get(id);
    panel.hidden = false;
    document.body.classList.add("panel-open");
    title.textContent = row ? meta.envs[row.e] + " · task " + row.t + " · repeat " + row.r : "Episode not found";
    if (!row) {
      body.replaceChildren(el("p", "error-box", "No episode with id " + id + " in this report."));
      document.body.dataset.trajectory = "";
      return;
    }
    body.replaceChildren(el("p", "dim", "Loading…"));
    T.loadChunk("chunk-" + row.c).then(function (records) {
      drawEpisode(row, records[row.p]);
      panel.scrollTop = 0;
      document.body.dataset.trajectory = id;
    }).catch(function (error) {
      body.replaceChildren(el("p", "error-box", "Could not read this trajectory: " + error.message));
      document.body.dataset.trajectory = "";
    });
  }

  function closePanel() {
    panel.hidden = true;
    document.body.classList.remove("panel-open");
    delete document.body.dataset.trajectory;
  }

  T.route("episode", panel, document.getElementById("trajectory-close"), showEpisode, closePanel);
  document.body.dataset.ready = "1";
})();
